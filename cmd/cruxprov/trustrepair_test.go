package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryRepairRebuildsLostTrust: trust.json deleted, every command
// that reads the trust state refused it, and registry repair too ("restore
// trust.json from a copy of the registry"), though the history and the
// change-sets hold every governance step. The refusal now advises
// registry repair --root-key PUB, and that makes trust.json again, byte
// for byte: key list, registry log --verify and approvals work again.
func TestRegistryRepairRebuildsLostTrust(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b")
	must := func(args ...string) result { t.Helper(); return mustRun(t, run, args...) }
	b := strings.TrimSpace(must("--quiet", "key", "trust", filepath.Join(keys, "b.pub")).stdout)
	must("changeset", "approve", b, "--key", filepath.Join(keys, "a.key"))
	p := strings.TrimSpace(must("--quiet", "policy", "set", "--threshold", "2").stdout)
	must("changeset", "approve", p, "--key", filepath.Join(keys, "b.key"))
	tf := filepath.Join(home, "registry", "trust.json")
	want, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(tf)
	fix := "to fix: cruxprov registry repair --root-key PUB --home " + home
	for _, args := range [][]string{{"key", "list"}, {"registry", "repair"}} {
		if r := run(args...); r.code != exitRefused || !strings.Contains(r.stderr, "refused: registry_corrupt:") || !strings.Contains(r.stderr, fix) {
			t.Errorf("%v, trust.json lost: %+v", args, r)
		}
	}
	if r := run("registry", "repair", "--root-key", filepath.Join(keys, "b.pub")); r.code != exitRefused {
		t.Errorf("repair with another key: %+v", r)
	}
	if r := run("registry", "repair", "--root-key", filepath.Join(keys, "a.key")); r.code != exitUsage {
		t.Errorf("repair with the private key: %+v", r)
	}
	if _, err := os.Stat(tf); err == nil {
		t.Fatal("trust.json written by a refused repair")
	}
	if r := must("registry", "repair", "--root-key", filepath.Join(keys, "a.pub")); !strings.Contains(r.stdout, "trust.json written again from the history") {
		t.Errorf("repair: %+v", r)
	}
	if got, err := os.ReadFile(tf); err != nil || !bytes.Equal(got, want) {
		t.Errorf("trust.json made again differs: %v\n got %s\nwant %s", err, got, want)
	}
	must("registry", "log", "--verify")
	if r := must("key", "list"); !strings.Contains(r.stdout, "a (root)") || !strings.Contains(r.stdout, "b ") {
		t.Errorf("key list: %+v", r)
	}
	if r := must("registry", "repair"); !strings.Contains(r.stdout, "nothing to repair") {
		t.Errorf("repair again: %+v", r)
	}
}

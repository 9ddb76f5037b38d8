package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// govWalkStore is approvingStore's store with a fixture world, skipped
// without the host interpreter the fixture env is built on.
func govWalkStore(t *testing.T) (base string, w *governedWorld, run, must func(args ...string) result) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	base = testdir.New(t)
	w = newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	run, must, _ = approvingStore(t, w, base, "/usr/bin/python3.11")
	return base, w, run, must
}

// csOf is the change-set id a --json proposal printed.
func csOf(t *testing.T, r result) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	cs, _ := v["changeSet"].(map[string]any)
	md, _ := cs["metadata"].(map[string]any)
	id, _ := md["id"].(string)
	if id == "" {
		t.Fatalf("no change-set in %s", r.stdout)
	}
	return id
}

func wantRefusal(t *testing.T, r result, code, what string) {
	t.Helper()
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+code+":") {
		t.Errorf("%s: want %s (exit 78): %+v", what, code, r)
	}
}

// TestGovWalkTrustPutBack: a key is untrusted (an approved change-set),
// then the trust document from before it is put back (a backup restored,
// or whoever writes the registry). Alone it replays cleanly, so the
// untrusted key's approval counted again: verify must hold the trust
// document to the governance steps the history records (DESIGN §8:
// signer_untrusted for a key no longer trusted), for a verifier that
// replayed that very document before (its floor) as for a fresh one.
func TestGovWalkTrustPutBack(t *testing.T) {
	base, w, run, must := govWalkStore(t)
	keys := filepath.Join(base, "keys")
	must("key", "generate", "--out", filepath.Join(keys, "bob"))
	bob := csOf(t, must("key", "trust", filepath.Join(keys, "bob.pub"), "--name", "bob", "--json"))
	must("changeset", "approve", bob, "--key", filepath.Join(keys, "k.key"))
	// acme-echo approved by bob alone (threshold 1).
	id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile", "--quiet").stdout)
	must("changeset", "approve", id, "--key", filepath.Join(keys, "bob.key"))
	must("verify", "acme-echo") // the executor's floor holds this trust document
	trustFile := filepath.Join(base, "home", "registry", "trust.json")
	before, err := os.ReadFile(trustFile)
	if err != nil {
		t.Fatal(err)
	}
	un := csOf(t, must("key", "untrust", "bob", "--json"))
	must("changeset", "approve", un, "--key", filepath.Join(keys, "k.key"))
	wantRefusal(t, run("verify", "acme-echo"), "signer_untrusted", "verify a pin approved by a key untrusted since")
	if err := os.WriteFile(trustFile, before, 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, run("verify", "acme-echo"), "registry_corrupt", "verify with the trust document from before the untrust put back")
	fresh := filepath.Join(base, "fresh-state")
	wantRefusal(t, run("verify", "acme-echo", "--state-dir", fresh), "registry_corrupt", "the same, by a verifier without a floor")
	wantRefusal(t, run("registry", "log", "--verify"), "registry_corrupt", "registry log --verify with the trust document put back")
	cmd := exec.Command(bin, "--home", filepath.Join(base, "home"), "run", "acme-echo", "echo", "--input", "-", "--state-dir", fresh)
	cmd.Stdin = strings.NewReader(`{"hello":"world"}`)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
	wantRefusal(t, runCmd(t, cmd), "registry_corrupt", "run with the trust document put back")
}

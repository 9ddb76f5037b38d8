package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// govFlow drives the governance commands end to end through the binary:
// run runs it with --home home (a directory the runner owns).
func govFlow(t *testing.T, home string, run func(args ...string) result) {
	t.Helper()
	ok := func(args ...string) map[string]any {
		t.Helper()
		r := run(append(args, "--json")...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %v %q", args, err, r.stdout)
		}
		if want := "cruxprov." + strings.Join(args[:2], ".") + "/v1"; v["schema"] != want {
			t.Fatalf("%v: schema %v want %s", args, v["schema"], want)
		}
		return v
	}
	refused := func(code string, args ...string) {
		t.Helper()
		r := run(args...)
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: "+code+":") {
			t.Fatalf("%v: want %s: %+v", args, code, r)
		}
	}
	csID := func(v map[string]any) string {
		t.Helper()
		cs, _ := v["changeSet"].(map[string]any)
		md, _ := cs["metadata"].(map[string]any)
		id, _ := md["id"].(string)
		if id == "" {
			t.Fatalf("no change-set in %v", v)
		}
		return id
	}
	keys := filepath.Join(home, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(home); err == nil {
		sys := st.Sys().(*syscall.Stat_t)
		os.Chown(keys, int(sys.Uid), int(sys.Gid))
	}
	for _, n := range []string{"alice", "bob", "carol"} {
		ok("key", "generate", "--out", filepath.Join(keys, n))
	}
	if st, err := os.Stat(filepath.Join(keys, "alice.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("alice.key: %v %v", st.Mode(), err)
	}
	if r := run("key", "generate", "--out", filepath.Join(keys, "alice")); r.code != exitFailure {
		t.Fatalf("overwrote a key: %+v", r)
	}
	if v := ok("key", "trust", filepath.Join(keys, "alice.pub")); v["root"] != true {
		t.Fatalf("first key is not the root: %v", v)
	}
	bob := csID(ok("key", "trust", filepath.Join(keys, "bob.pub")))
	refused("signer_untrusted", "changeset", "approve", bob, "--key", filepath.Join(keys, "bob.key"))
	// The JSON diff says which key a trust change adds, as the text does.
	if k, _ := ok("changeset", "diff", bob)["key"].(map[string]any); k["role"] != "approver" || !strings.HasPrefix(fmt.Sprint(k["digest"]), "sha256:") {
		t.Fatalf("the diff of a trust change does not name the key: %v", k)
	}
	if v := ok("changeset", "approve", bob[7:19], "--key", filepath.Join(keys, "alice.key")); v["accepted"] != true {
		t.Fatalf("%v", v)
	}
	pol := csID(ok("policy", "set", "--threshold", "2"))
	if p, _ := ok("changeset", "diff", pol)["policy"].(map[string]any); p["threshold"] != float64(2) {
		t.Fatalf("the diff of a policy change does not show it: %v", p)
	}
	ok("changeset", "approve", pol, "--key", filepath.Join(keys, "alice.key"))
	if v := ok("policy", "show"); v["threshold"] != float64(2) {
		t.Fatalf("%v", v)
	}
	// Threshold 2: one approval is one short; the key is not trusted.
	carol := csID(ok("key", "trust", filepath.Join(keys, "carol.pub")))
	if v := ok("changeset", "approve", carol, "--key", filepath.Join(keys, "alice.key")); v["accepted"] != false {
		t.Fatalf("one short accepted: %v", v)
	}
	if v := ok("key", "list"); len(v["keys"].([]any)) != 2 {
		t.Fatalf("%v", v)
	}
	lower := csID(ok("policy", "set", "--threshold", "1"))
	if v := ok("changeset", "approve", lower, "--key", filepath.Join(keys, "bob.key")); v["accepted"] != false {
		t.Fatalf("threshold lowered by one key: %v", v)
	}
	ok("changeset", "reject", lower, "--reason", "no")
	refused("changeset_invalid", "changeset", "approve", lower, "--key", filepath.Join(keys, "bob.key"))
	if v := ok("changeset", "show", carol); v["status"].(map[string]any)["state"] != "proposed" {
		t.Fatalf("%v", v)
	}
	if v := ok("changeset", "list"); len(v["changeSets"].([]any)) != 4 {
		t.Fatalf("%v", v)
	}
	ok("provider", "list")
	refused("pin_unapproved", "provider", "show", "acme-echo")
	refused("pin_unapproved", "provider", "retire", "acme-echo")
	schema := filepath.Join(home, "echo.schema.json")
	os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644)
	ok("interface", "register", "cruxible.echo/v1", "--schema", schema)
	os.WriteFile(schema, []byte(`{"type":"array"}`), 0o644)
	refused("interface_digest_mismatch", "interface", "register", "cruxible.echo/v1", "--schema", schema)
	// A schema is at most 1 MiB: larger is interface_invalid, before it
	// is read (a 30 MB one took 500 MB of memory to register).
	big := filepath.Join(home, "big.schema.json")
	os.WriteFile(big, []byte(`{"description":"`+strings.Repeat("x", 1<<20)+`"}`), 0o644)
	refused("interface_invalid", "interface", "register", "cruxible.big/v1", "--schema", big)
	// A schema whose own "id" names another interface is not registered
	// under this one (acme.echo's schema was accepted as acme.hello).
	echo := filepath.Join(home, "acme.echo.json")
	os.WriteFile(echo, []byte(`{"id":"acme.echo","type":"object"}`), 0o644)
	if r := run("interface", "register", "acme.hello", "--schema", echo); r.code != exitRefused ||
		!strings.HasPrefix(r.stderr, "refused: interface_invalid:") || !strings.Contains(r.stderr, "acme.echo") || !strings.Contains(r.stderr, "acme.hello") {
		t.Fatalf("another interface's schema: %+v", r)
	}
	if v := ok("interface", "list"); len(v["interfaces"].([]any)) != 1 {
		t.Fatalf("%v", v)
	}
	if v := ok("registry", "log", "--verify"); v["verified"] != true || len(v["entries"].([]any)) < 10 {
		t.Fatalf("%v", v)
	} else {
		// The chain is in the JSON: each entry's prev is the hash before
		// it, and the registry's id is the first entry's hash.
		es := v["entries"].([]any)
		prev := "sha256:" + strings.Repeat("0", 64)
		for _, e := range es {
			m := e.(map[string]any)
			if m["prev"] != prev || len(fmt.Sprint(m["hash"])) != 71 {
				t.Fatalf("entry %v after %s", m, prev)
			}
			prev = m["hash"].(string)
		}
		if v["registry_id"] != es[0].(map[string]any)["hash"] {
			t.Fatalf("registry_id %v", v["registry_id"])
		}
	}
	for _, p := range []string{"trust.json", "log.jsonl", "interfaces.json"} {
		if st, err := os.Stat(filepath.Join(home, "registry", p)); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A reordered history is refused by every command.
	lp := filepath.Join(home, "registry", "log.jsonl")
	b, _ := os.ReadFile(lp)
	l := bytes.SplitAfter(b, []byte("\n"))
	l[1], l[2] = l[2], l[1]
	os.WriteFile(lp, bytes.Join(l, nil), 0o644)
	refused("registry_corrupt", "registry", "log")
	refused("registry_corrupt", "key", "list")
}

func TestGovernanceCLI(t *testing.T) {
	home := t.TempDir()
	govFlow(t, home, func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=correct horse")
		return runCmd(t, cmd)
	})
}

// TestGovernanceCLINonRoot runs the same flow as uid 65534 owning its
// own home (operators are not root).
func TestGovernanceCLINonRoot(t *testing.T) {
	// nobodyBase only needs an existing file as its "python".
	base, exe := nobodyBase(t, "cruxprov-gov", "/bin/sh")
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	govFlow(t, home, func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=correct horse"}
		return runCmd(t, cmd)
	})
}

func TestGovernanceHelpAndPassword(t *testing.T) {
	for _, args := range [][]string{
		{"interface", "register"}, {"interface", "list"}, {"key", "generate"}, {"key", "trust"}, {"key", "untrust"}, {"key", "list"},
		{"policy", "show"}, {"policy", "set"}, {"registry", "log"}, {"changeset", "list"}, {"changeset", "show"}, {"changeset", "diff"},
		{"changeset", "approve"}, {"changeset", "reject"}, {"provider", "list"}, {"provider", "show"}, {"provider", "retire"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, append(args, "--help")...)
			if r.code != 0 || !strings.Contains(r.stdout, "Example") {
				t.Fatalf("%+v", r)
			}
		})
	}
	// No password variable and no terminal: a clear usage error.
	cmd := exec.Command(bin, "--home", t.TempDir(), "key", "generate", "--out", filepath.Join(t.TempDir(), "k"))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CRUXPROV_KEY_PASSWORD=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, "CRUXPROV_KEY_PASSWORD") {
		t.Fatalf("%+v", r)
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// trustResult is what key trust --json says.
type trustResult struct {
	Root      bool
	Already   bool
	Key       registry.Key
	ChangeSet *registry.ChangeSet `json:"changeSet"`
}

// keyTrustJSON runs key trust --json with args in home and decodes what it
// says; the exit code is the caller's to check.
func keyTrustJSON(t *testing.T, home string, env []string, args ...string) (trustResult, result) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home, "key", "trust", "--json"}, args...)...)
	cmd.Env = env
	r := runCmd(t, cmd)
	var v trustResult
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("key trust %v: %v: %+v", args, err, r)
		}
	}
	return v, r
}

// historyLen is the length of the registry's history in home.
func historyLen(t *testing.T, home string) int {
	t.Helper()
	d, err := registry.OpenDir(context.Background(), filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Chain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(c)
}

// TestKeyTrustAgain: key trust run again with the key trusted already
// under that name and role (the operator could not tell whether it went
// through) exits 0 saying so and changes nothing, for the root of trust
// and for a later key trusted by a change-set. It refused
// changeset_invalid ("this very key … nothing to change"), which read as
// a failure. Another role under the name is still refused, and the same
// key under another name still proposed.
func TestKeyTrustAgain(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, "keys")
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
	for _, n := range []string{"alice", "bob"} {
		cmd := exec.Command(bin, "--home", home, "key", "generate", "--out", filepath.Join(keys, n))
		cmd.Env = env
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("key generate %s: %+v", n, r)
		}
	}
	alice, bob := filepath.Join(keys, "alice.pub"), filepath.Join(keys, "bob.pub")
	if v, r := keyTrustJSON(t, home, env, alice); r.code != 0 || !v.Root || v.Already {
		t.Fatalf("the root: %+v", r)
	}
	v, r := keyTrustJSON(t, home, env, bob)
	if r.code != 0 || v.ChangeSet == nil {
		t.Fatalf("bob proposed: %+v", r)
	}
	cmd := exec.Command(bin, "--home", home, "changeset", "approve", v.ChangeSet.Metadata.ID.String(), "--key", filepath.Join(keys, "alice.key"))
	cmd.Env = env
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("approve bob: %+v", r)
	}
	n := historyLen(t, home)
	for _, c := range []struct {
		pub, name string
		root      bool
	}{{alice, "alice", true}, {bob, "bob", false}} {
		t.Run(c.name, func(t *testing.T) {
			v, r := keyTrustJSON(t, home, env, c.pub)
			if r.code != 0 || !v.Already || v.Root != c.root || v.ChangeSet != nil || v.Key.Name != c.name || !strings.Contains(r.stdout, `"already": true`) {
				t.Errorf("%s trusted again: %+v", c.name, r)
			}
			cmd := exec.Command(bin, "--home", home, "key", "trust", c.pub, "--name", c.name, "--role", "approver")
			cmd.Env = env
			r = runCmd(t, cmd)
			if r.code != 0 || !strings.Contains(r.stdout, "trusted already "+c.name) || !strings.Contains(r.stdout, "nothing changed") || strings.Contains(r.stdout, "ROOT OF TRUST") != c.root {
				t.Errorf("%s trusted again, the text: %+v", c.name, r)
			}
		})
	}
	if m := historyLen(t, home); m != n {
		t.Fatalf("trusting again wrote %d history entries", m-n)
	}
	// Not the same request, as before: bob as a builder is refused (the
	// name is taken), alice under another name is proposed.
	if _, r := keyTrustJSON(t, home, env, bob, "--role", "builder"); r.code != exitRefused || !strings.Contains(r.stderr, "changeset_invalid") || !strings.Contains(r.stderr, "a key named bob is already trusted") {
		t.Errorf("bob as a builder: %+v", r)
	}
	if v, r := keyTrustJSON(t, home, env, alice, "--name", "alice-laptop"); r.code != 0 || v.Already || v.Root || v.ChangeSet == nil {
		t.Errorf("alice under another name: %+v", r)
	}
}

// TestKeyTrustRootKilled kills the root's key trust (SIGKILL, strace) at
// each write of its commit: the journal's rename (the commit point),
// trust.json's rename and the journal's removal. The same command run
// again exits 0 with the key the root of trust: trusted then (killed
// before the commit point), or trusted already, nothing changed (past
// it, where it refused changeset_invalid: the operator could not tell
// that the registry had its root).
func TestKeyTrustRootKilled(t *testing.T) {
	strace := straceOrSkip(t)
	for _, p := range []struct {
		syscall, file string
		committed     bool
	}{
		{"renameat,rename,renameat2", "journal.json", false},
		{"renameat,rename,renameat2", "trust.json", true},
		{"unlinkat,unlink", "journal.json", true},
	} {
		t.Run(p.syscall[:strings.IndexByte(p.syscall, ',')]+"/"+p.file, func(t *testing.T) {
			home := t.TempDir()
			env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
			key := filepath.Join(home, "keys", "alice")
			cmd := exec.Command(bin, "--home", home, "key", "generate", "--out", key)
			cmd.Env = env
			if r := runCmd(t, cmd); r.code != 0 {
				t.Fatalf("key generate: %+v", r)
			}
			if err := os.MkdirAll(filepath.Join(home, "registry"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd = exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-P", filepath.Join(home, "registry", p.file),
				"-e", "trace="+p.syscall, "-e", "inject="+p.syscall+":signal=SIGKILL:when=1",
				bin, "--home", home, "key", "trust", key+".pub")
			cmd.Env = env
			if r := runCmd(t, cmd); r.code == 0 {
				t.Fatalf("key trust was not killed at %s of %s: %+v", p.syscall, p.file, r)
			}
			v, r := keyTrustJSON(t, home, env, key+".pub")
			if r.code != 0 || !v.Root || v.Already != p.committed || v.ChangeSet != nil {
				t.Fatalf("killed (committed: %v); the same key trust again: %+v", p.committed, r)
			}
		})
	}
}

// TestKeyListRootIsAKey: the root of trust (alice) untrusted, and another
// key trusted since under the name alice: key list marks no key root
// (it marked the new alice, by name), and --json names no root (it still
// said "root": "alice" with the untrusted key's digest once alice was
// untrusted: the governance.md walk as cruxprov-rootless). While the
// root key is trusted, both name it.
func TestKeyListRootIsAKey(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	alice, bob, alice2 := registrytest.NewKey(t, "alice", registry.RoleApprover), registrytest.NewKey(t, "bob", registry.RoleApprover), registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, alice.Key, "t"); err != nil {
		t.Fatal(err)
	}
	check := func(when string, root *registrytest.Key) {
		t.Helper()
		r := runCmd(t, exec.Command(bin, "--home", home, "key", "list"))
		if marked := strings.Contains(r.stdout, "(root)"); r.code != 0 || marked != (root != nil) || root != nil && !strings.Contains(r.stdout, "alice (root)") {
			t.Errorf("%s: key list: %+v", when, r)
		}
		r = runCmd(t, exec.Command(bin, "--home", home, "key", "list", "--json"))
		var v struct {
			Root       string  `json:"root"`
			RootDigest *string `json:"rootDigest"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
			t.Fatalf("%s: key list --json: %v %+v", when, err, r)
		}
		switch {
		case root == nil && (v.Root != "" || v.RootDigest != nil):
			t.Errorf("%s: key list --json names a root no longer trusted: %s", when, r.stdout)
		case root != nil && (v.Root != root.Key.Name || v.RootDigest == nil || *v.RootDigest != root.Key.Digest.String()):
			t.Errorf("%s: key list --json: want root %s %s: %s", when, root.Key.Name, root.Key.Digest, r.stdout)
		}
	}
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionTrustKey, Key: &bob.Key}, alice)
	check("the root trusted", &alice)
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice"}}, bob)
	check("the root untrusted", nil)
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionTrustKey, Key: &alice2.Key}, bob)
	check("another key trusted under the root's name", nil)
	if r := runCmd(t, exec.Command(bin, "--home", home, "key", "list")); !strings.Contains(r.stdout, alice2.Key.Digest.String()) {
		t.Errorf("key list: %+v", r)
	}
}

// TestKeyTrustBadNameSaysWhichName: a --name that is no key name is
// refused naming the flag; "(give --name)" is said only where the name
// is PUB's file name (it was said of a --name given too).
func TestKeyTrustBadNameSaysWhichName(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "Ops Key.pub")
	if err := os.WriteFile(pub, []byte("not read: the name is checked first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if r := cruxprov(t, "--home", home, "key", "trust", pub, "--name", "Bad Name"); r.code != exitUsage ||
		!strings.Contains(r.stderr, `usage: --name "Bad Name" is no key name: want 1 to 128`) || strings.Contains(r.stderr, "give --name") {
		t.Errorf("--name given: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "key", "trust", pub); r.code != exitUsage ||
		!strings.Contains(r.stderr, `usage: key name "ops key": want 1 to 128`) || !strings.Contains(r.stderr, "(give --name)") {
		t.Errorf("the file's name: %+v", r)
	}
}

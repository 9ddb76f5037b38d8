package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/store"
)

// readOnlyCommands only read the store: none may make anything in it.
var readOnlyCommands = [][]string{
	{"gc", "--dry-run"},
	{"gc", "--dry-run", "--envs"},
	{"registry", "log"},
	{"registry", "log", "--verify"},
	{"provider", "list"},
	{"provider", "show", "acme-echo"},
	{"changeset", "list"},
	{"changeset", "show", "0123456789abcdef"},
	{"changeset", "diff", "0123456789abcdef"},
	{"key", "list"},
	{"interface", "list"},
	{"policy", "show"},
	{"env", "list"},
}

// tree lists every path under root (nil when root is missing).
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestReadOnlyCommandsMakeNothing, as the store's unprivileged owner
// (uid 65534): gc --dry-run, registry log and the lists and shows write
// nothing, on an existing store (they made registry/changesets and
// registry/pins) or an empty directory (gc --dry-run made a whole store
// there), and with a --home that names nothing they say there is no store
// there, as verify does, rather than make one (plain gc too).
func TestReadOnlyCommandsMakeNothing(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-readonly-", "")
	state := filepath.Join(base, "state")
	as := func(home string, args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "XDG_STATE_HOME=" + state}
		return runCmd(t, cmd)
	}
	made := filepath.Join(base, "store")
	if _, err := store.Open(made); err != nil { // the layout, an empty registry/
		t.Fatal(err)
	}
	empty := filepath.Join(base, "empty")
	os.Mkdir(empty, 0o755)
	chownTree(t, base)
	for _, home := range []string{made, empty} {
		before := tree(t, home)
		for _, args := range append(slices.Clone(readOnlyCommands), []string{"verify", "acme-echo"}) {
			r := as(home, args...)
			if r.code == exitUsage {
				t.Errorf("%v: %+v", args, r)
			}
			if after := tree(t, home); !slices.Equal(before, after) {
				t.Fatalf("%s %v made %v", home, args, diffPaths(before, after))
			}
		}
	}
	missing := filepath.Join(base, "no-such-home")
	for _, args := range append(slices.Clone(readOnlyCommands), []string{"gc"}, []string{"gc", "--envs"}) {
		r := as(missing, args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "there is no store at "+missing+"; check --home (or CRUXPROV_HOME)") {
			t.Errorf("%v with --home naming nothing: %+v", args, r)
		}
		if _, err := os.Lstat(missing); err == nil {
			t.Fatalf("%v made %s: %v", args, missing, tree(t, missing))
		}
	}
}

func diffPaths(before, after []string) []string {
	var out []string
	for _, p := range after {
		if !slices.Contains(before, p) {
			out = append(out, "+"+p)
		}
	}
	for _, p := range before {
		if !slices.Contains(after, p) {
			out = append(out, "-"+p)
		}
	}
	return out
}

// TestGCEnvsAsNonOwner: gc --envs by a user who may not write the store
// fails as gc does for a blob it may not remove (exit 1, "run gc as its
// owner"), not with env remove's materialize_failed refusal (exit 78:
// gc is no install, verify or run path), and removes nothing. Its dry
// run lists an unsealed tree once (gc --envs listed it a second time).
func TestGCEnvsAsNonOwner(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-gcenvs-", debian)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	home, lock := envHomeAt(t, home, 1, 2)
	out, err := exec.Command(exe, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", debian, "--offline", "--no-compile").CombinedOutput()
	if err != nil {
		t.Fatalf("create as the owner: %v\n%s", err, out)
	}
	envs, _ := filepath.Glob(filepath.Join(home, "envs", "*.seal.json"))
	if len(envs) != 1 {
		t.Fatalf("envs: %v", envs)
	}
	env := strings.TrimSuffix(envs[0], ".seal.json")
	as := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		return runCmd(t, cmd)
	}
	if r := as("gc", "--envs"); r.code != exitFailure || !strings.Contains(r.stderr, "error: cannot remove the env "+env) ||
		!strings.Contains(r.stderr, "permission denied; the store is not writable by this user: run gc as its owner") {
		t.Errorf("gc --envs as a non-owner: %+v", r)
	}
	if _, err := os.Stat(env); err != nil {
		t.Errorf("the env is gone: %v", err)
	}

	unsealed := filepath.Join(home, "envs", strings.Repeat("a", 64))
	if err := os.Mkdir(unsealed, 0o755); err != nil {
		t.Fatal(err)
	}
	r := as("gc", "--envs", "--dry-run")
	if r.code != 0 || strings.Count(r.stdout, "would remove envs/"+strings.Repeat("a", 64)+"\n") != 1 || !strings.Contains(r.stdout, "would remove envs/"+filepath.Base(env)+"\n") {
		t.Errorf("gc --envs --dry-run: %+v", r)
	}
}

// TestEnvByDigestWithoutAStore: env verify, sbom, remove and create
// --replace, given an env by its digest (or a prefix of it) with a --home
// that names nothing, say there is no store there (exit 1), as env list
// does, and make nothing: they said "no env … in the store (cruxprov env
// list shows them)", exit 64, sending the user to env list, which said
// there is no store; env remove of a full digest made a whole store at
// the mistyped --home and answered "nothing removed", exit 0.
func TestEnvByDigestWithoutAStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-home")
	const hex = "442ccc7f83f1de73158bba8a017ac9a83f87835d95a0400c8970383d8b005046"
	for _, args := range [][]string{
		{"env", "verify", "sha256:442ccc7f"},
		{"env", "verify", "sha256:" + hex},
		{"env", "verify", hex[:12]},
		{"env", "sbom", "sha256:442ccc7f"},
		{"env", "remove", "sha256:442ccc7f"},
		{"env", "remove", "sha256:" + hex},
		{"env", "remove", filepath.Join(missing, "envs", hex)},
		{"env", "create", "--replace", "sha256:442ccc7f"},
	} {
		r := cruxprov(t, append([]string{"--home", missing}, args...)...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "there is no store at "+missing+"; check --home (or CRUXPROV_HOME)") {
			t.Errorf("%v with --home naming nothing: %+v", args, r)
		}
		if _, err := os.Lstat(missing); err == nil {
			t.Fatalf("%v made %s: %v", args, missing, tree(t, missing))
		}
	}
}

// TestHomeIsAFile: a --home that is a file (a token, a key given by
// mistake), or that has a file above it, is no store: the commands that
// read one say so as for a --home that names nothing, verify refuses
// pin_unapproved saying so, and those that change the registry say it
// cannot be the store, as the store's own open does. They refused
// registry_corrupt, "cannot read the registry directory …: not a
// directory", whose advice is to restore the registry from a copy.
func TestHomeIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "acme.echo.json")
	if err := os.WriteFile(schema, []byte(`{"id":"acme.echo"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	writers := [][]string{{"interface", "register", "acme.echo", "--schema", schema}, {"policy", "set", "--threshold", "1"}}
	for _, home := range []string{file, filepath.Join(file, "store")} {
		for _, args := range append(append(slices.Clone(readOnlyCommands), []string{"gc"}, []string{"verify", "acme-echo"}, []string{"registry", "repair"}), writers...) {
			r := cruxprov(t, append([]string{"--home", home}, args...)...)
			want, code := "there is no store at "+home+": "+file+" is a file, not a directory; check --home (or CRUXPROV_HOME)", exitFailure
			switch {
			case args[0] == "verify":
				code = exitRefused
			case slices.ContainsFunc(writers, func(w []string) bool { return slices.Equal(w, args) }):
				want = "cannot use " + home + " as the store: " + file + " is a file, not a directory; give --home (or CRUXPROV_HOME) a directory"
			}
			if r.code != code || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "registry_corrupt") {
				t.Errorf("--home %s %v: %+v", home, args, r)
			}
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "s3cret\n" {
		t.Fatalf("the file at --home: %q %v", b, err)
	}
}

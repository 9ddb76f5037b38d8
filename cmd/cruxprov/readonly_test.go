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

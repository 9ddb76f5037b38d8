package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryUnreadableAdvisesChmod: a registry this user may not read
// (its history 0600 to another user, its directory or the store above
// it 0700) is refused registry_unreadable (it was registry_corrupt, the
// code of damage to restore from a copy) with a remedy, "; to fix: chmod
// a+rX PATH", PATH the one that denied it (the first directory on the
// way this user may not enter, else the file), which its owner runs;
// the command then reads the registry. It came with no remedy, and named
// only the path it read: a history under a directory of 0700 was said
// to be unreadable, though its own mode was 0644. Root reads whatever
// the modes: as root the test reads as uid 65534 (asuser), the registry
// root's; as another user it reads as itself, the registry its own
// (mode 0 denies its owner too).
func TestRegistryUnreadableAdvisesChmod(t *testing.T) {
	base, reader := modesReader(t, "cruxprov-registry-unreadable-")
	for _, c := range []struct {
		name string
		deny string // relative to the store
		mode os.FileMode
	}{
		{"history", "registry/log.jsonl", 0o600},
		{"registry directory", "registry", 0o700},
		{"store", ".", 0o700},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
			keys := filepath.Join(base, "keys-"+filepath.Base(home))
			env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
			for _, args := range [][]string{{"key", "generate", "--out", filepath.Join(keys, "ops")}, {"key", "trust", filepath.Join(keys, "ops.pub"), "--name", "ops", "--role", "approver"}} {
				cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
				cmd.Env = env
				if r := runCmd(t, cmd); r.code != 0 {
					t.Fatalf("%v: %+v", args, r)
				}
			}
			if r := reader("--home", home, "registry", "log"); r.code != 0 {
				t.Fatalf("registry log before: %+v", r)
			}
			denied := filepath.Clean(filepath.Join(home, c.deny))
			mode := c.mode
			if os.Geteuid() != 0 {
				mode = 0 // its owner reads 0600 and 0700
			}
			if err := os.Chmod(denied, mode); err != nil {
				t.Fatal(err)
			}
			r := reader("--home", home, "registry", "log")
			fix := "; to fix: chmod a+rX " + denied
			if r.code != exitRefused || !strings.Contains(r.stderr, "refused: registry_unreadable: ") ||
				!strings.Contains(r.stderr, "permission denied to this user") || !strings.Contains(r.stderr, " on "+denied+" ") || !strings.HasSuffix(strings.TrimSpace(r.stderr), fix) {
				t.Fatalf("registry log of a registry denied at %s: %+v, want registry_unreadable ending %q", denied, r, fix)
			}
			// The owner (this test) runs the fix as printed.
			if f := runFix(t, r, base); f.code != 0 {
				t.Fatalf("the fix: %+v", f)
			}
			if r := reader("--home", home, "registry", "log"); r.code != 0 {
				t.Fatalf("registry log after the fix: %+v", r)
			}
		})
	}
}

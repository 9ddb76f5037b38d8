package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestKeyGenerateFullDisk: a key generate that runs out of space leaves no
// file behind, so that the same command, once there is room, makes the
// pair. It left an empty PREFIX.key (no room for it) or a PREFIX.key
// beside an empty PREFIX.pub (room for one page), and the retry refused
// "exists: not overwriting a key". A real 12 KiB tmpfs (three pages), with
// no page free, then one.
func TestKeyGenerateFullDisk(t *testing.T) {
	for _, free := range []int{0, 1} {
		dir := testdir.Tmpfs(t, "12k")
		fill := filepath.Join(dir, "fill")
		if err := os.WriteFile(fill, make([]byte, (3-free)*4096), 0o644); err != nil {
			t.Fatal(err)
		}
		prefix := filepath.Join(dir, "keys", "alice")
		gen := func() result {
			cmd := exec.Command(bin, "key", "generate", "--out", prefix)
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir(), "CRUXPROV_KEY_PASSWORD=pw")
			return runCmd(t, cmd)
		}
		if r := gen(); r.code != exitFailure {
			t.Fatalf("%d pages free: a full disk: %+v", free, r)
		}
		for _, p := range []string{prefix + ".key", prefix + ".pub"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%d pages free: %s left behind", free, p)
			}
		}
		os.Remove(fill)
		if r := gen(); r.code != 0 {
			t.Fatalf("%d pages free: the retry with room: %+v", free, r)
		}
	}
}

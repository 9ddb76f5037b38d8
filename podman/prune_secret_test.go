package podman

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestPruneSecretMounts: the private secret tmpfs of a path-mode run
// whose executor was killed stays mounted, with the bundle the shim may
// not have read; a later prune unmounts and removes it, and leaves one a
// live run holds (flock on its root) and one younger than a run's first
// moment. Real tmpfs mounts: needs root, as path mode does.
func TestPruneSecretMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("path mode's private tmpfs needs root")
	}
	parent := t.TempDir()
	mount := func() string {
		p, err := privateTmpfs(parent, "65534", "65534", []byte(`{"acme/alpha":"s3cr3t"}`))
		if err != nil {
			t.Skipf("cannot mount a private tmpfs here: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(p, syscall.MNT_DETACH); os.Remove(p) })
		return p
	}
	dead, live, young := mount(), mount(), mount()
	old := time.Now().Add(-2 * time.Minute)
	for _, p := range []string{dead, live} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	held, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	gone := pruneSecretMounts(parent)
	if !slices.Equal(gone, []string{dead}) {
		t.Errorf("pruned %v, want only %s", gone, filepath.Base(dead))
	}
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the dead run's mount is still there")
	}
	for _, p := range []string{live, young} {
		if _, err := os.Stat(filepath.Join(p, "bundle")); err != nil {
			t.Errorf("%s: %v (a live or young run's bundle was taken)", filepath.Base(p), err)
		}
	}
}

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
// live run holds (the flock on its root privateTmpfs takes) and one
// younger than a run's first moment. Real tmpfs mounts: needs root, as
// path mode does.
func TestPruneSecretMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("path mode's private tmpfs needs root")
	}
	parent := t.TempDir()
	mount := func() (string, *os.File) {
		p, lock, err := privateTmpfs(parent, "65534", "65534", []byte(`{"acme/alpha":"s3cr3t"}`))
		if err != nil {
			t.Skipf("cannot mount a private tmpfs here: %v", err)
		}
		t.Cleanup(func() { lock.Close(); syscall.Unmount(p, syscall.MNT_DETACH); os.Remove(p) })
		return p, lock
	}
	dead, deadLock := mount()
	live, _ := mount()
	young, youngLock := mount()
	// The dead run's executor is gone, and with it its lock; the young
	// run's is let go to show that its age alone keeps it.
	deadLock.Close()
	youngLock.Close()
	old := time.Now().Add(-2 * time.Minute)
	for _, p := range []string{dead, live} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
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

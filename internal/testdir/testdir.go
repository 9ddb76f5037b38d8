// Package testdir gives tests temporary directories that a user who is
// not root can remove: a sealed env, a store's blobs and an image tree are
// read-only (directories 0555), and testing's own cleanup of t.TempDir
// then fails with "permission denied" for everyone but root, who ignores
// the modes. Tests import it, and the test helper package invoketest,
// whose TempDir is this New for an executor's own tests.
package testdir

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// New returns t.TempDir(), registering a cleanup that runs before
// testing's removal of it and gives the owner write permission on every
// directory below it.
func New(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { Writable(dir) })
	return dir
}

// Writable gives the owner read, write and search permission on every
// directory below root (root included), so that it can be removed.
// Errors are ignored: what cannot be changed is reported by the removal.
func Writable(root string) {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			if fi, e := d.Info(); e == nil && fi.Mode().Perm()&0o700 != 0o700 {
				_ = os.Chmod(p, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
}

// Tmpfs mounts a tmpfs of size (mount's -o size=, e.g. "64k", "16m") on a
// new directory, mode 0755, and returns it; it is unmounted (lazily)
// when the test ends. A real small disk, for what a full one does. It
// skips t, saying why, where it cannot mount one (not root, or a
// machine that forbids it).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Returns runs fn and returns its error, failing t when fn has not
// returned within 10 seconds: a call that blocks for ever (an open(2) of a
// FIFO nobody writes, which no signal ends) fails its test by name, not
// the whole suite at its timeout.
func Returns(t testing.TB, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s", what)
		return nil
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestCopiedStoreFloorRefusal: a store copied whole (cp -a) and verified
// from the state directory that verified the original, once the
// original changed, is refused registry_corrupt saying whose floor the
// state directory holds, with the command again with --state-dir DIR as
// its fix, which verifies the copy: it said "its tail was cut off" and
// advised restoring the registry (overwriting the copy) or moving the
// floor aside, not knowing a copy from a rollback. Runs as the user the
// test runs as (root, or an unprivileged one), owner of both stores.
func TestCopiedStoreFloorRefusal(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	home, copied, state := filepath.Join(base, "store"), filepath.Join(base, "copy"), filepath.Join(base, "state")
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
		t.Fatal(err)
	}
	verify := func(home string, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home, "verify", "acme-echo"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base, "XDG_STATE_HOME=" + state}
		return runCmd(t, cmd)
	}
	// The pin verifies and raises the floor; its env is not there (a
	// registry made here, not by install), which is refused after.
	if r := verify(home); strings.Contains(r.stderr, "registry_corrupt") || !strings.Contains(r.stderr, "refused: ") {
		t.Fatalf("verify the original: %+v", r)
	}
	if err := os.CopyFS(copied, os.DirFS(home)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if r := verify(home); strings.Contains(r.stderr, "registry_corrupt") {
		t.Fatalf("verify the original changed: %+v", r)
	}
	r := verify(copied)
	orig, err := filepath.EvalSymlinks(filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	want := "this state directory's floor is of the registry at " + orig + "; verify each copy from a state directory of its own"
	fix := "; to fix: cruxprov --home " + copied + " verify acme-echo --state-dir DIR"
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: registry_corrupt: ") || !strings.Contains(r.stderr, want) ||
		strings.Contains(r.stderr, "cut off") || strings.Contains(r.stderr, "rollback") || strings.Contains(r.stderr, "restore the registry") || !strings.Contains(r.stderr, fix) {
		t.Fatalf("verify the copy from the original's state directory: %+v\nwant %q and %q", r, want, fix)
	}
	// The fix, with a state directory of the copy's own: past the floor.
	if r := verify(copied, "--state-dir", filepath.Join(base, "copy-state")); strings.Contains(r.stderr, "registry_corrupt") {
		t.Fatalf("verify the copy from a state directory of its own: %+v", r)
	}
}

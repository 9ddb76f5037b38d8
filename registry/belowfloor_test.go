package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestBelowFloorSaysWhatToDo: walking governance.md as cruxprov-rootless,
// a registry restored from a copy taken before the last entry a verifier
// saw was refused "registry_corrupt: the history has 38 entries; this
// verifier saw 41 (its tail was cut off)", naming no way on, though
// governance.md ("Restoring the registry from a backup") has two: the
// newest copy, or the floor moved aside. The refusal names both (the
// length and head the copy must reach, the floor file's path), and each
// works.
func TestBelowFloorSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	root := d.Root()
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(parent, "backup")
	if err := os.CopyFS(backup, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	newest := filepath.Join(parent, "newest")
	if err := os.Rename(root, newest); err != nil {
		t.Fatal(err)
	}
	restore := func(from string) *registry.Dir {
		t.Helper()
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(root, os.DirFS(from)); err != nil {
			t.Fatal(err)
		}
		r, err := registry.OpenDir(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	old := restore(backup)
	_, err := registry.VerifyPin(ctx, old, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
	if len(floors) != 1 {
		t.Fatalf("floors: %v", floors)
	}
	for _, want := range []string{"its tail was cut off", "restore the registry from its newest copy", "move this verifier's floor " + floors[0] + " aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	// The newest copy verifies.
	if _, err := registry.VerifyPin(ctx, restore(newest), state, "acme-echo", time.Now()); err != nil {
		t.Fatalf("the newest copy restored: %v", err)
	}
	// The older copy, with the floor moved aside, verifies too.
	old = restore(backup)
	if err := os.Rename(floors[0], floors[0]+".aside"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, old, state, "acme-echo", time.Now()); err != nil {
		t.Fatalf("the older copy with the floor moved aside: %v", err)
	}
}

// TestCopiedRegistryBesideItsOriginal: a store copied whole (cp -a: a
// backup, a second store) keeps its registry's identity, so a verifier
// that verifies both from one state directory keeps one floor for the
// two: a change in one, and the other is refused registry_corrupt, its
// tail "cut off" (or, changed too, forked). The refusal advised only
// restoring the registry from its newest copy (which would overwrite the
// second store) or moving the floor aside (after which the other copy is
// refused in turn). It says now that copies share the floor, and to
// verify each from a state directory of its own, which works.
func TestCopiedRegistryBesideItsOriginal(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	copyRoot := filepath.Join(parent, "copy")
	if err := os.CopyFS(copyRoot, os.DirFS(d.Root())); err != nil {
		t.Fatal(err)
	}
	c, err := registry.OpenDir(ctx, copyRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	want := "if this registry is a copy of one this verifier also verifies (a store copied whole, as a backup or a second store, keeps its registry's identity, and so shares this verifier's floor), verify each copy from a state directory of its own; otherwise restore the registry"
	_, err = registry.VerifyPin(ctx, c, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if !strings.Contains(err.Error(), "its tail was cut off") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("the copy, the original changed: %v\nwant %q", err, want)
	}
	// Changed too, it forks: the same advice.
	if _, err := c.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t"); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, c, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if !strings.Contains(err.Error(), "forks from what this verifier saw") || !strings.Contains(err.Error(), want) {
		t.Errorf("the copy, both changed: %v\nwant %q", err, want)
	}
	// Each from a state directory of its own: both verify, again and again.
	own := t.TempDir()
	for range 2 {
		if _, err := registry.VerifyPin(ctx, c, own, "acme-echo", time.Now()); err != nil {
			t.Fatalf("the copy from a state directory of its own: %v", err)
		}
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
			t.Fatalf("the original from its state directory: %v", err)
		}
	}
}

package registry_test

import (
	"context"
	"encoding/json"
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
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
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
	for _, want := range []string{"its tail was cut off", "in this same registry", "restore the registry from its newest copy", "move this verifier's floor " + floors[0] + " aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	// The floor names this registry's directory: it is this registry put
	// back, not a copy beside it, and the refusal says only that (it
	// said both, the copy first, not knowing which).
	if strings.Contains(err.Error(), "copy of one this verifier also verifies") || strings.Contains(err.Error(), "verify each copy") || refusal.RemedyOf(err) != nil {
		t.Errorf("this registry put back: %v (remedy %+v), want no advice for a copy", err, refusal.RemedyOf(err))
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
// verify each from a state directory of its own, which works. The floor
// records the directory of the registry it was raised for, so the
// refusal says whose floor it is, and claims no rollback: it
// said "its tail was cut off" and advised restoring the registry too,
// not knowing a copy from this registry put back.
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
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	orig, err := filepath.EvalSymlinks(d.Root())
	if err != nil {
		t.Fatal(err)
	}
	want := "this state directory's floor is of the registry at " + orig + "; verify each copy from a state directory of its own"
	copyRefused := func(what, says string) {
		t.Helper()
		_, err := registry.VerifyPin(ctx, c, state, "acme-echo", time.Now())
		wantRefusal(t, err, refusal.RegistryCorrupt)
		msg := err.Error()
		if !strings.Contains(msg, want) || !strings.Contains(msg, says) || strings.Contains(msg, "\n") {
			t.Errorf("the copy, %s: %v\nwant %q", what, err, want)
		}
		// Not said as a rollback of this registry, with a rollback's
		// advice (restore it, move the floor aside).
		for _, not := range []string{"tail was cut off", "rollback", "restore the registry", "aside"} {
			if strings.Contains(msg, not) {
				t.Errorf("the copy, %s: %v says %q", what, err, not)
			}
		}
		if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionSetStateDir {
			t.Errorf("the copy, %s: remedy %+v, want %s", what, rem, refusal.ActionSetStateDir)
		}
	}
	copyRefused("the original changed", "has 4 entries; this verifier saw 5 in the registry at "+orig)
	// Changed too, it forks: the same advice.
	if _, _, err := c.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t"); err != nil {
		t.Fatal(err)
	}
	copyRefused("both changed", "parts at entry 4 from the one this verifier saw in the registry at "+orig)
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

// TestMovedRegistryKeepsItsFloor: a store its operator moved (mv) keeps
// its registry's identity and its floor: verified at its new path from
// the same state directory it verifies as before, and the floor moves
// to that path, so that the moved registry put back to an older state
// is refused as this registry's rollback, not as a copy. A store moved
// and found behind the floor at once (the floor's directory no longer
// there) is refused saying both what that is if it was moved here, and
// what to do if it is a copy of a registry moved away.
func TestMovedRegistryKeepsItsFloor(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(parent, "backup")
	if err := os.CopyFS(backup, os.DirFS(d.Root())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	chain, err := d.Chain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	floorOf := func() *registry.Floor {
		t.Helper()
		f, err := registry.ReadFloor(state, chain[0])
		if err != nil || f == nil {
			t.Fatalf("ReadFloor: %v, %v", f, err)
		}
		return f
	}
	before, _ := filepath.EvalSymlinks(d.Root())
	if f := floorOf(); f.Root != before {
		t.Errorf("the floor's root %q, want %q", f.Root, before)
	}
	moved := filepath.Join(parent, "moved")
	if err := os.Rename(d.Root(), moved); err != nil {
		t.Fatal(err)
	}
	m, err := registry.OpenDir(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, m, state, "acme-echo", time.Now()); err != nil {
		t.Fatalf("the registry moved, from the same state directory: %v", err)
	}
	movedAbs, _ := filepath.EvalSymlinks(moved)
	if f := floorOf(); f.Root != movedAbs {
		t.Errorf("the floor's root %q after the move, want %q", f.Root, movedAbs)
	}
	// Put back where it now lives: a rollback of this registry.
	putBack := func(at string) *registry.Dir {
		t.Helper()
		if err := os.RemoveAll(at); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(at, os.DirFS(backup)); err != nil {
			t.Fatal(err)
		}
		r, err := registry.OpenDir(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	_, err = registry.VerifyPin(ctx, putBack(moved), state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if msg := err.Error(); !strings.Contains(msg, "in this same registry") || !strings.Contains(msg, "restore the registry from its newest copy") || strings.Contains(msg, "verify each copy") {
		t.Errorf("the moved registry put back: %v", err)
	}
	// Moved again and put back at once: the floor's directory is gone.
	again := filepath.Join(parent, "again")
	if err := os.Rename(moved, again); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, putBack(again), state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	for _, want := range []string{
		"this verifier saw 5 in the registry at " + movedAbs,
		"which is not there any more: if this registry was moved here from " + movedAbs + ", it is behind what this verifier saw there: restore the registry from its newest copy",
		"if it is a copy of that registry (a store copied whole keeps its registry's identity), now elsewhere, this state directory's floor is of the registry at " + movedAbs + "; verify each copy from a state directory of its own",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("moved and put back: %v\nwant %q", err, want)
		}
	}
}

// TestFloorWithoutRootReadsAsBefore: a floor written before floors kept
// the registry's directory reads as it did: it verifies (and gains the
// directory at its next write), and a history behind it is refused
// saying both what a copy and what a rollback would be, as it did.
func TestFloorWithoutRootReadsAsBefore(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
	if len(floors) != 1 {
		t.Fatalf("floors: %v", floors)
	}
	// The floor as a cruxprov before Root wrote it.
	stripRoot := func() {
		t.Helper()
		b, err := os.ReadFile(floors[0])
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["root"]; !ok {
			t.Fatalf("the floor names no root: %s", b)
		}
		delete(m, "root")
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(floors[0], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stripRoot()
	backup := filepath.Join(parent, "backup")
	if err := os.CopyFS(backup, os.DirFS(d.Root())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatalf("an old floor: %v", err)
	}
	stripRoot()
	b, err := registry.OpenDir(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, b, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	want := "the history has 4 entries; this verifier saw 5 (its tail was cut off): if this registry is a copy of one this verifier also verifies (a store copied whole, as a backup or a second store, keeps its registry's identity, and so shares this verifier's floor), verify each copy from a state directory of its own; otherwise restore the registry"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("behind an old floor: %v\nwant %q", err, want)
	}
}

// TestFloorRootThroughASymlink: one store reached through a symlink is
// one store (governance.md): its floor records the directory the link
// names, so the registry verified by either path and then put back is
// this registry's rollback, not a copy beside it.
func TestFloorRootThroughASymlink(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	link := filepath.Join(parent, "link")
	if err := os.Symlink(d.Root(), link); err != nil {
		t.Fatal(err)
	}
	l, err := registry.OpenDir(ctx, link)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, l, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(parent, "backup")
	if err := os.CopyFS(backup, os.DirFS(d.Root())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, l, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d.Root()); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(d.Root(), os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	r, err := registry.OpenDir(ctx, d.Root())
	if err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, r, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if msg := err.Error(); !strings.Contains(msg, "in this same registry") || strings.Contains(msg, "verify each copy") {
		t.Errorf("put back, verified through the link before: %v", err)
	}
}

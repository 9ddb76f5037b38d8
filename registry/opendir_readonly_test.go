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

// TestOpenDirReadOnlyMakesNothing: the commands that only read open the
// registry with OpenDirReadOnly, which makes neither the registry nor its
// changesets/ and pins/ (OpenDir made both, so gc --dry-run and registry
// log wrote to the store), reads a registry never written as empty, and
// refuses every mutation.
func TestOpenDirReadOnlyMakesNothing(t *testing.T) {
	ctx := context.Background()
	for _, pre := range []bool{false, true} {
		root := filepath.Join(t.TempDir(), "registry")
		if pre {
			os.Mkdir(root, 0o755)
		}
		d, err := registry.OpenDirReadOnly(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if sets, err := d.ChangeSets(ctx); err != nil || len(sets) != 0 {
			t.Errorf("change-sets: %v %v", sets, err)
		}
		if pins, err := d.Pins(ctx); err != nil || len(pins) != 0 {
			t.Errorf("pins: %v %v", pins, err)
		}
		if log, err := d.Log(ctx); err != nil || len(log) != 0 {
			t.Errorf("log: %v %v", log, err)
		}
		k := registrytest.NewKey(t, "a", registry.RoleApprover)
		if _, err := d.TrustKey(ctx, k.Key, "t"); err == nil {
			t.Error("a mutation of a registry opened read-only")
		}
		var made []string
		filepath.WalkDir(filepath.Dir(root), func(p string, _ os.DirEntry, err error) error {
			if err == nil && p != filepath.Dir(root) && !(pre && p == root) {
				made = append(made, p)
			}
			return nil
		})
		if len(made) != 0 {
			t.Errorf("made %v", made)
		}
	}
}

// TestNoRegistryThere: the pin of a provider in a registry whose root is
// not there at all (an executor given a path that names no store, which
// OpenDirReadOnly reads as empty) is refused pin_unapproved naming that
// path, with no advice to review change-sets: there are none to review.
// It advised them, as for a registry where nothing was approved yet; that
// one now advises proposing the provider (TestNeverAcceptedSaysWhatIsNext):
// nothing of it is proposed there either.
func TestNoRegistryThere(t *testing.T) {
	ctx := context.Background()
	for _, there := range []bool{false, true} {
		root := filepath.Join(t.TempDir(), "registry")
		if there {
			os.Mkdir(root, 0o755)
		}
		d, err := registry.OpenDirReadOnly(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		_, err = registry.VerifyPin(ctx, d, "", "acme-echo", time.Now())
		if refusal.CodeOf(err) != refusal.PinUnapproved {
			t.Fatalf("there %v: %v, want pin_unapproved", there, err)
		}
		rem := refusal.RemedyOf(err)
		if there {
			if rem == nil || rem.Action != refusal.ActionPropose {
				t.Errorf("an empty registry: remedy %+v, want %s", rem, refusal.ActionPropose)
			}
			continue
		}
		if rem != nil || !strings.Contains(err.Error(), "there is no registry at "+root) {
			t.Errorf("no registry: %v (remedy %+v), want it named and no remedy", err, rem)
		}
	}
}

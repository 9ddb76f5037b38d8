package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// midVerify is a Reader that, once VerifyPin has read the floor and the
// pin through it, lets another verification of the same verifier finish
// first (runs in parallel: the interleaving a busy executor meets).
type midVerify struct {
	registry.Reader
	between func()
}

func (m *midVerify) Trust(ctx context.Context) (*registry.Trust, error) {
	if f := m.between; f != nil {
		m.between = nil
		f()
	}
	return m.Reader.Trust(ctx)
}

// TestFloorNeverLowered: two verifications of one verifier at once, one
// of the registry as it was (revision 1, a shorter history), one of it
// as it is now (revision 2). Whichever writes its floor last, the floor
// keeps the longer history and the higher revision: the older snapshot's
// write lowered it, and the registry then rolled back to that snapshot
// verified cleanly (DESIGN §8: VerifyPin raises the floor).
func TestFloorNeverLowered(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(parent, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	approve := func(version string) {
		t.Helper()
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", version), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	approve("1.0")
	// The registry as it was at revision 1: a copy of its files.
	oldRoot := filepath.Join(parent, "old")
	if err := os.CopyFS(oldRoot, os.DirFS(d.Root())); err != nil {
		t.Fatal(err)
	}
	old, err := registry.OpenDir(ctx, oldRoot)
	if err != nil {
		t.Fatal(err)
	}
	approve("2.0")
	state := t.TempDir()
	now := time.Now()
	slow := &midVerify{Reader: old, between: func() {
		if p, err := registry.VerifyPin(ctx, d, state, "acme-echo", now); err != nil || p.Revision != 2 {
			t.Fatalf("verify revision 2: %v", err)
		}
	}}
	if _, err := registry.VerifyPin(ctx, slow, state, "acme-echo", now); err != nil {
		t.Fatalf("the verification of the older snapshot: %v", err)
	}
	chain, err := d.Chain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := registry.ReadFloor(state, chain[0])
	if err != nil || f == nil {
		t.Fatalf("floor: %v", err)
	}
	if f.Length != len(chain) || f.Head != chain[len(chain)-1] || f.Providers["acme-echo"] != 2 {
		t.Errorf("floor lowered: length %d head %s revision %d; the verifier saw %d entries and revision 2", f.Length, f.Head, f.Providers["acme-echo"], len(chain))
	}
	// The registry rolled back to that snapshot is refused.
	_, err = registry.VerifyPin(ctx, old, state, "acme-echo", now)
	wantRefusal(t, err, refusal.RegistryCorrupt)
}

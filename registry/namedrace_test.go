package registry_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/sign"
)

// midNames is a Dir that, once NamedBy has read the pins through it,
// lets another process's approval run (a Dir of its own, so a lock of
// its own) and waits for it a while: the interleaving gc met beside an
// operator's `changeset approve`.
type midNames struct {
	*registry.Dir
	between func()
}

func (m *midNames) Pins(ctx context.Context) ([]*registry.Pin, error) {
	p, err := m.Dir.Pins(ctx)
	if f := m.between; f != nil {
		m.between = nil
		f()
	}
	return p, err
}

// approveMeanwhile is d as a midNames whose reader, once it has read the
// pins, lets another Dir of d's registry approve id with priv
// and waits for it a while (it waits for the reader's lock, if the
// reader holds one); done has the approval's error.
func approveMeanwhile(t *testing.T, d *registry.Dir, id digest.Digest, priv *sign.PrivateKey) (*midNames, chan error) {
	ctx := context.Background()
	done := make(chan error, 1)
	return &midNames{Dir: d, between: func() {
		other, err := registry.OpenDir(ctx, d.Root())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := other.Approve(ctx, id, priv, nil)
			done <- err
		}()
		select {
		case err := <-done:
			done <- err
		case <-time.After(500 * time.Millisecond):
		}
	}}, done
}

// TestNamedByBesideAnApproval: what NamedBy reads (the pins, the history,
// the change-sets) is one state of the registry. Before, each was read
// on its own: an approval between the pins and the change-sets left the
// env of the change-set it accepted named by neither (the old pin named
// the old env, the change-set was no longer proposed), and `gc --envs`
// removed the env of the pin just accepted; an approval between the pins
// and the history refused gc registry_corrupt ("pins/acme-echo.json is
// not that pin ... to fix: cruxprov registry repair") for a registry
// that was not damaged (both seen with gc --envs in a loop beside
// install and approve).
func TestNamedByBesideAnApproval(t *testing.T) {
	ctx := context.Background()
	d, _, keys, approve := govDir(t, 1, "root")
	key := keys["root"]
	approve(registrytest.Change("acme-echo", "1.0"), nil, key)
	next := approve(registrytest.Change("acme-echo", "2.0"), nil)
	env := func(cs *registry.ChangeSet) digest.Digest {
		return cs.Spec.Changes[0].Provider.Materializations[0].Digest
	}
	m, done := approveMeanwhile(t, d, next.Metadata.ID, key.Priv)
	names, err := registry.NamedBy(ctx, m)
	if err != nil {
		t.Fatalf("NamedBy beside an approval: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approve: %v", err)
	}
	// Either state is right, never a mix: before the approval both envs
	// are named (the pin's and the proposal's); after it, the new pin's.
	if !slices.Contains(names.Envs, env(next)) {
		t.Errorf("NamedBy names %v: not the env %s the approval accepted", names.Envs, env(next))
	}
}

// TestAuditBesideARetirement: `registry log --verify` (Audit) reads the
// registry as one state. Before, it read the pins and then verified each
// with its own lock: a retirement approved in between failed the audit
// pin_unapproved ("provider acme-echo was retired") for a registry that
// was intact (seen as an executor beside an operator's provider retire).
func TestAuditBesideARetirement(t *testing.T) {
	ctx := context.Background()
	d, _, keys, approve := govDir(t, 1, "root")
	key := keys["root"]
	approve(registrytest.Change("acme-echo", "1.0"), nil, key)
	retire := approve(registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, nil)
	m, done := approveMeanwhile(t, d, retire.Metadata.ID, key.Priv)
	if _, _, err := registry.Audit(ctx, m, time.Now()); err != nil {
		t.Errorf("registry log --verify beside a retirement: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approve the retirement: %v", err)
	}
	if _, un, err := registry.Audit(ctx, d, time.Now()); err != nil || len(un) != 0 {
		t.Errorf("after the retirement: %v %v", un, err)
	}
}

package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// govDir is the registry tests' governance setup, once: a clocked Dir
// registry (clockedDir) trusting an approver key for each of names —
// the first is the root of trust, each other one trusted by a change-set
// the root approves, in order — then, when threshold > 1, the policy set
// to it by the root's approval (the root alone meets the threshold of 1
// in force). It returns the keys by name and approve, which proposes a
// Change (or takes a *ChangeSet) and approves it with the keys given
// (with expiry exp when not nil), failing the test on any error. A test
// whose point is another order (a threshold raised after a pin is
// accepted, a policy proposed before a key is trusted) passes 1 and does
// that itself.
func govDir(t *testing.T, threshold int, names ...string) (*registry.Dir, *time.Time, map[string]registrytest.Key, func(any, *time.Time, ...registrytest.Key) *registry.ChangeSet) {
	t.Helper()
	if len(names) == 0 || threshold > len(names) {
		t.Fatalf("govDir: %d keys for threshold %d", len(names), threshold)
	}
	ctx := context.Background()
	d, clock := clockedDir(t)
	keys := map[string]registrytest.Key{}
	for _, n := range names {
		keys[n] = registrytest.NewKey(t, n, registry.RoleApprover)
	}
	approve := func(x any, exp *time.Time, by ...registrytest.Key) *registry.ChangeSet {
		t.Helper()
		cs, ok := x.(*registry.ChangeSet)
		if !ok {
			var err error
			if cs, _, err = d.Propose(ctx, x.(registry.Change), "t"); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range by {
			if _, err := d.Approve(ctx, cs.Metadata.ID, k.Priv, exp); err != nil {
				t.Fatal(err)
			}
		}
		return cs
	}
	root := keys[names[0]]
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	for _, n := range names[1:] {
		tr, err := d.TrustKey(ctx, keys[n].Key, "t")
		if err != nil {
			t.Fatal(err)
		}
		approve(tr.ChangeSet, nil, root)
	}
	if threshold > 1 {
		approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: threshold}}, nil, root)
	}
	return d, clock, keys, approve
}

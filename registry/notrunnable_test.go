package registry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// govDir is a clocked Dir registry trusting alice (the root), bob and
// carol, and an approve helper that proposes a Change or approves a
// change-set with the keys given (with expiry exp when not nil).
func govDir(t *testing.T) (*registry.Dir, *time.Time, map[string]registrytest.Key, func(any, *time.Time, ...registrytest.Key) *registry.ChangeSet) {
	t.Helper()
	ctx := context.Background()
	d, clock := clockedDir(t)
	keys := map[string]registrytest.Key{}
	for _, n := range []string{"alice", "bob", "carol"} {
		keys[n] = registrytest.NewKey(t, n, registry.RoleApprover)
	}
	approve := func(x any, exp *time.Time, by ...registrytest.Key) *registry.ChangeSet {
		t.Helper()
		cs, ok := x.(*registry.ChangeSet)
		if !ok {
			var err error
			if cs, err = d.Propose(ctx, x.(registry.Change), "t"); err != nil {
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
	if _, err := d.TrustKey(ctx, keys["alice"].Key, "t"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"bob", "carol"} {
		tr, err := d.TrustKey(ctx, keys[n].Key, "t")
		if err != nil {
			t.Fatal(err)
		}
		approve(tr.ChangeSet, nil, keys["alice"])
	}
	return d, clock, keys, approve
}

// TestVerifyPinApproverUntrusted: a pin approved by alice and bob at
// threshold 2, then alice untrusted (a key rotation approved by bob and
// carol), is not runnable until approved again: signer_untrusted naming
// alice as the history does, with the remedy to propose it again, and
// NotRunnable (so `registry log --verify` lists it and holds). Before,
// the refusal named only the key's digest and failed the whole audit.
func TestVerifyPinApproverUntrusted(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t)
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, k["alice"])
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"], k["bob"])
	if _, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock); err != nil {
		t.Fatal(err)
	}
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice"}}, nil, k["bob"], k["carol"])
	_, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock)
	wantRefusal(t, err, refusal.SignerUntrusted)
	if !registry.NotRunnable(err) {
		t.Errorf("an approver untrusted since is a state, not a break: %v", err)
	}
	if !strings.Contains(err.Error(), "approval by alice (") || !strings.Contains(err.Error(), "propose the provider again") {
		t.Errorf("the refusal does not name alice or say what to do: %v", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionPropose || rem.Target != "acme-echo" {
		t.Errorf("remedy %+v, want %s acme-echo", rem, refusal.ActionPropose)
	}
}

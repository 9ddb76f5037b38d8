package registry_test

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApprovableWithoutTheKey: what an approval is refused for whatever
// key signs it — a change-set unknown, stale, rejected, or accepted and
// replaced since — Approvable says without a key, with Approve's code
// (changeset approve asks it before the key's password: it asked for the
// passphrase first, then refused). What the key decides (approving the
// accepted pin's change-set again, a renewal) and a proposal that can be
// approved are nil, and Approve still decides them.
func TestApprovableWithoutTheKey(t *testing.T) {
	ctx := context.Background()
	d, _, keys, approve := govDir(t, 1, "alice")
	alice := keys["alice"]
	carol, dave := registrytest.NewKey(t, "carol", registry.RoleApprover), registrytest.NewKey(t, "dave", registry.RoleApprover)
	propose := func(c registry.Change) *registry.ChangeSet {
		t.Helper()
		cs, _, err := d.Propose(ctx, c, "t")
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	v1 := approve(registrytest.Change("acme-echo", "1.0"), nil, alice)
	v2 := approve(registrytest.Change("acme-echo", "2.0"), nil, alice) // v1 replaced
	open := propose(registrytest.Change("acme-echo", "3.0"))
	stale := propose(registry.Change{Action: registry.ActionTrustKey, Key: &carol.Key})
	approve(propose(registry.Change{Action: registry.ActionTrustKey, Key: &dave.Key}), nil, alice) // carol's proposal stale
	rejected := propose(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}})
	if _, err := d.Reject(ctx, rejected.Metadata.ID, "no", "t"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		id   digest.Digest
		want refusal.Code
	}{
		{"unknown", digest.Sum([]byte("nothing")), refusal.ChangesetInvalid},
		{"stale", stale.Metadata.ID, refusal.ChangesetStale},
		{"rejected", rejected.Metadata.ID, refusal.ChangesetInvalid},
		{"accepted and replaced since", v1.Metadata.ID, refusal.ChangesetInvalid},
	} {
		t.Run(c.what, func(t *testing.T) {
			err := d.Approvable(ctx, c.id)
			if refusal.CodeOf(err) != c.want {
				t.Errorf("%s: Approvable: %v, want %s", c.what, err, c.want)
			}
			_, aerr := d.Approve(ctx, c.id, alice.Priv, nil)
			if err == nil || aerr == nil || aerr.Error() != err.Error() {
				t.Errorf("%s: Approvable %v, Approve %v: want the same refusal", c.what, err, aerr)
			}
		})
	}
	for _, id := range []digest.Digest{open.Metadata.ID, v2.Metadata.ID} {
		if err := d.Approvable(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	if res, err := d.Approve(ctx, v2.Metadata.ID, alice.Priv, nil); err != nil || !res.Already {
		t.Errorf("approving the accepted pin's change-set again: %+v %v", res, err)
	}
}

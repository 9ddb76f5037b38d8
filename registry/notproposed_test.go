package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApproveRetireNotProposedSaysRetire: walking governance.md as two
// operators, an approval of a rejected retire change-set advised
// `cruxprov install WHEEL --platform PLATFORM --python PYTHON --index
// URL` (the advice for a provider's install, whose spec names a
// package; a retirement's names none): a retirement is proposed again by
// retiring the provider again. And the accepted retirement, approved by
// a key that had not signed it, advised the same install, though the
// provider is retired as the registry holds now: nothing is left to
// approve, and nothing is proposed.
func TestApproveRetireNotProposedSaysRetire(t *testing.T) {
	ctx := context.Background()
	d, _, keys, approve := govDir(t, 1, "alice", "bob")
	alice, bob := keys["alice"], keys["bob"]
	approve(registrytest.Change("acme-echo", "1.0"), nil, alice)
	retire := registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}
	cs := approve(retire, nil)
	if _, err := d.Reject(ctx, cs.Metadata.ID, "not yet", "t"); err != nil {
		t.Fatal(err)
	}
	_, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil)
	if refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Fatalf("approve of a rejected retirement: %v, want changeset_invalid", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionRetire || r.Target != "acme-echo" {
		t.Errorf("approve of a rejected retirement: remedy %+v, want retire acme-echo (%v)", r, err)
	}
	if !strings.Contains(err.Error(), "to retire acme-echo, propose it again (retire acme-echo again)") {
		t.Errorf("approve of a rejected retirement: %q does not say to retire it again", err)
	}

	// Proposed again, accepted with alice's approval: bob's is refused,
	// saying it is retired now, with no advice to propose anything.
	approve(retire, nil, alice)
	_, err = d.Approve(ctx, cs.Metadata.ID, bob.Priv, nil)
	if refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Fatalf("bob's approval of the accepted retirement: %v, want changeset_invalid", err)
	}
	if r := refusal.RemedyOf(err); r != nil {
		t.Errorf("bob's approval of the accepted retirement: remedy %+v, want none (%v)", r, err)
	}
	if !strings.Contains(err.Error(), "it retired acme-echo at revision 2, as the registry holds now: there is nothing more to approve") {
		t.Errorf("bob's approval of the accepted retirement: %q does not say it is retired now", err)
	}
}

// TestApproveAppliedTrustChangeSaysItApplies: walking governance.md as
// two operators, bob approved the change-set that had trusted his key
// (alice's approval had accepted it) and was refused advising `key trust
// PUB --name bob` "to make this trust change": that proposes nothing and
// says "trusted already … nothing changed", and `policy set --threshold
// 2` for an applied threshold says "threshold 2 already". A trust change
// in force now says so, whichever step made it so; one undone since is
// still proposed again.
func TestApproveAppliedTrustChangeSaysItApplies(t *testing.T) {
	ctx := context.Background()
	d, _, keys, approve := govDir(t, 1, "alice", "bob")
	alice, bob := keys["alice"], keys["bob"]
	carol := registrytest.NewKey(t, "carol", registry.RoleApprover)
	var bobTrust *registry.ChangeSet
	css, err := d.ChangeSets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range css {
		if c := cs.Spec.Changes[0]; c.Action == registry.ActionTrustKey && c.Key.Name == "bob" {
			bobTrust = cs
		}
	}
	if bobTrust == nil {
		t.Fatal("no change-set trusted bob")
	}
	says := func(what string, err error, want string, action refusal.Action) {
		t.Helper()
		if refusal.CodeOf(err) != refusal.ChangesetInvalid {
			t.Fatalf("%s: %v, want changeset_invalid", what, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", what, err, want)
		}
		r := refusal.RemedyOf(err)
		if action == "" && r != nil || action != "" && (r == nil || r.Action != action) {
			t.Errorf("%s: remedy %+v, want %q", what, r, action)
		}
	}
	// The trust state's last step, in force.
	_, err = d.Approve(ctx, bobTrust.Metadata.ID, bob.Priv, nil)
	says("bob approving his own trust, applied", err, "its trust change applies now (bob is trusted as approver): there is nothing more to approve", refusal.ActionListKeys)

	raise := approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, alice)
	_, err = d.Approve(ctx, raise.Metadata.ID, bob.Priv, nil)
	says("bob approving the threshold alice set", err, "its trust change applies now (the threshold is 2): there is nothing more to approve", "")
	// No longer the last step, still in force (refused before the key).
	_, err = d.Approve(ctx, bobTrust.Metadata.ID, bob.Priv, nil)
	says("bob approving his own trust, a step since", err, "its trust change applies now (bob is trusted as approver)", refusal.ActionListKeys)

	// Undone since: proposing it again is the way.
	tr, err := d.TrustKey(ctx, carol.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(tr.ChangeSet, nil, alice, bob)
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "carol", Digest: carol.Key.Digest}}, nil, alice, bob)
	_, err = d.Approve(ctx, tr.ChangeSet.Metadata.ID, bob.Priv, nil)
	says("approving carol's trust once she was untrusted", err, "to make this trust change, propose it again (trust the key again, as carol with the role approver)", refusal.ActionTrustKey)
}

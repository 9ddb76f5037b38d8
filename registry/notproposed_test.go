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

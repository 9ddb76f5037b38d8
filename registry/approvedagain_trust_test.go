package registry_test

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/registry"
)

// TestApproveAgainTrustCountsAtItsThreshold: walking governance.md as
// cruxprov-rootless, `policy set --threshold 2` approved by alice (the
// threshold 1 then) and approved again by her (an approver who cannot
// tell whether it went through) printed "approved already …: nothing
// changed (1 of 2 approvals unexpired)" and "accepted": counted against
// the threshold the change itself raised. A trust change is accepted at
// the threshold in force before it and stays applied: "1 of 1".
func TestApproveAgainTrustCountsAtItsThreshold(t *testing.T) {
	ctx := context.Background()
	d, alice, bob := aliceRoot(t)
	tr, err := d.TrustKey(ctx, bob.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Already || !again.Accepted || again.Approvals != 1 || again.Threshold != 1 {
		t.Errorf("approve again: already %v accepted %v, %d of %d approvals; want already, accepted, 1 of 1 (as the first: %d of %d)", again.Already, again.Accepted, again.Approvals, again.Threshold, first.Approvals, first.Threshold)
	}
}

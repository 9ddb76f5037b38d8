package registry_test

import (
	"context"
	"os"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApproveAgain: the key whose approval accepted the change-set the
// registry holds now approves it again and is told so (Already), with the
// pin, and nothing is written; the change-set it accepted before the
// registry moved on (its 1.0, replaced by 2.0) and a key that did not
// approve it are still refused changeset_invalid. A trust change-set
// approved again is told so too.
func TestApproveAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	sets, err := f.dir.ChangeSets(ctx)
	if err != nil || len(sets) != 2 {
		t.Fatalf("%d change-sets, %v", len(sets), err)
	}
	pin, err := f.dir.Pin(ctx, "acme-echo")
	if err != nil {
		t.Fatal(err)
	}
	cur, old := pin.SpecDigest, sets[0].Metadata.ID
	if old == cur {
		old = sets[1].Metadata.ID
	}
	log, _ := os.ReadFile(f.logPath())
	res, err := f.dir.Approve(ctx, cur, f.root.Priv, nil)
	if err != nil || !res.Already || !res.Accepted || res.Pin == nil || res.Pin.Revision != 2 || res.Approvals != 1 {
		t.Fatalf("approve again: %+v %v", res, err)
	}
	if after, _ := os.ReadFile(f.logPath()); string(after) != string(log) {
		t.Error("approving again wrote to the history")
	}
	if _, err := f.dir.Approve(ctx, old, f.root.Priv, nil); refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Errorf("the replaced change-set: %v", err)
	}
	other := registrytest.NewKey(t, "other", registry.RoleApprover)
	if _, err := f.dir.Approve(ctx, cur, other.Priv, nil); refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Errorf("a key that did not approve it: %v", err)
	}
	// A trust change: the trust state's last step is what the registry
	// holds; no pin in the result.
	tr, err := f.dir.TrustKey(ctx, other.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.dir.Approve(ctx, tr.ChangeSet.Metadata.ID, f.root.Priv, nil); err != nil {
		t.Fatal(err)
	}
	res, err = f.dir.Approve(ctx, tr.ChangeSet.Metadata.ID, f.root.Priv, nil)
	if err != nil || !res.Already || !res.Accepted || res.Pin != nil {
		t.Fatalf("approve the trust change again: %+v %v", res, err)
	}
}

package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestStrandedThresholdSaysWhatToDo: operator.md's `cruxprov policy set
// --threshold 2` with one approver key trusted was refused "the change
// would leave 1 distinct approver key for a threshold of 2: nothing
// could be approved again" and no more: the refusal now says what to do
// first, which depends on the change (trust a key before raising the
// threshold; lower the threshold before untrusting a key it needs).
func TestStrandedThresholdSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
	bob := registrytest.NewKey(t, "bob", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, alice.Key, "t"); err != nil {
		t.Fatal(err)
	}
	stranded := func(c registry.Change, want string) {
		t.Helper()
		_, err := d.Propose(ctx, c, "t")
		if refusal.CodeOf(err) != refusal.ChangesetInvalid {
			t.Fatalf("Propose(%s): %v, want changeset_invalid", c.Action, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Propose(%s): %q does not say %q", c.Action, err, want)
		}
	}
	stranded(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "trust another approver key first (cruxprov key trust)")
	stranded(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "would leave 1 distinct approver key for a threshold of 2")

	tr, err := d.TrustKey(ctx, bob.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := d.Propose(ctx, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	stranded(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, "lower the threshold first (cruxprov policy set --threshold N)")
}

package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
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
	d, alice, bob := aliceRoot(t)
	// The words say what to do first; the remedy (cmd/ renders it as
	// the command) does it.
	stranded := func(c registry.Change, want string, remedy refusal.Remedy) {
		t.Helper()
		_, _, err := d.Propose(ctx, c, "t")
		if refusal.CodeOf(err) != refusal.ChangesetInvalid {
			t.Fatalf("Propose(%s): %v, want changeset_invalid", c.Action, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Propose(%s): %q does not say %q", c.Action, err, want)
		}
		if r := refusal.RemedyOf(err); r == nil || r.Action != remedy.Action || r.Target != remedy.Target {
			t.Errorf("Propose(%s): remedy %+v, want %+v", c.Action, r, remedy)
		}
	}
	trustApprover := refusal.Remedy{Action: refusal.ActionTrustKey, Target: registry.RoleApprover}
	stranded(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "trust another approver key first, then set the threshold", trustApprover)
	stranded(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "would leave 1 distinct approver key for a threshold of 2", trustApprover)

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
	if _, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	stranded(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, "lower the threshold to 1 first, or trust another approver key", refusal.Remedy{Action: refusal.ActionSetThreshold, Target: "1"})
}

// TestStrandedLastApproverSaysWhatWorks: walking governance.md as an
// operator, `key untrust alice2` (alice's key trusted again under a
// second name, the threshold 1) was refused "the change would leave 0
// distinct approver keys for a threshold of 1 … lower the threshold
// first (cruxprov policy set --threshold N)", advice that cannot work
// (a threshold is at least 1: policy set --threshold 0 is a usage
// error), and it did not say that the key goes under every name. The
// refusal now names what works (trust another approver key first), the
// other names, and following it lets the untrust be proposed.
func TestStrandedLastApproverSaysWhatWorks(t *testing.T) {
	ctx := context.Background()
	d, alice, bob := aliceRoot(t)
	alias := alice.Key
	alias.Name = "alice2"
	tr, err := d.TrustKey(ctx, alias, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	untrust := registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice2", Digest: alice.Key.Digest}}
	_, _, err = d.Propose(ctx, untrust, "t")
	if refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Fatalf("untrust alice2: %v, want changeset_invalid", err)
	}
	for _, want := range []string{"would leave 0 distinct approver keys for a threshold of 1", "also trusted as alice,", "trust another approver key first and approve that"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("untrust alice2: %q does not say %q", err, want)
		}
	}
	if r := refusal.RemedyOf(err); strings.Contains(err.Error(), "lower the threshold") || r == nil || r.Action != refusal.ActionTrustKey || r.Target != registry.RoleApprover {
		t.Errorf("untrust alice2: %q (remedy %+v) advises lowering a threshold of 1, or not trusting an approver", err, r)
	}
	// Follow the advice.
	tr, err = d.TrustKey(ctx, bob.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, untrust, "t"); err != nil {
		t.Fatalf("untrust alice2 once bob is trusted: %v", err)
	}
}

// aliceRoot is a new Dir registry whose root of trust is the approver
// key alice (threshold 1: govDir's), and bob, an approver key it does not
// trust yet.
func aliceRoot(t *testing.T) (d *registry.Dir, alice, bob registrytest.Key) {
	t.Helper()
	d, _, keys, _ := govDir(t, 1, "alice")
	return d, keys["alice"], registrytest.NewKey(t, "bob", registry.RoleApprover)
}

// TestStrandedThresholdNamesTheOpenTrust: walking operator.md, `policy
// set --threshold 2` while the second approver key's `key trust` was
// proposed and not approved yet was refused "trust another approver key
// first" (to fix: key trust PUB), which only printed the open change-set
// again; `key untrust bob` with a third key's trust open advised lowering
// the threshold. The refusal now names the open trust change-set and
// advises its approval (a builder key's, which would not help, is not
// named), and once it is approved the change is proposed.
func TestStrandedThresholdNamesTheOpenTrust(t *testing.T) {
	ctx := context.Background()
	d, alice, bob := aliceRoot(t)
	builder := registrytest.NewKey(t, "ci", registry.RoleBuilder)
	if _, err := d.TrustKey(ctx, builder.Key, "t"); err != nil {
		t.Fatal(err)
	}
	raise := registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}
	if _, _, err := d.Propose(ctx, raise, "t"); refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionTrustKey {
		t.Fatalf("threshold 2 with only a builder key's trust open: %v (remedy %+v), want the advice to trust an approver key", err, refusal.RemedyOf(err))
	}
	tr, err := d.TrustKey(ctx, bob.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	open := tr.ChangeSet.Metadata.ID
	awaiting := func(c registry.Change, id digest.Digest, name string) {
		t.Helper()
		_, _, err := d.Propose(ctx, c, "t")
		if refusal.CodeOf(err) != refusal.ChangesetInvalid {
			t.Fatalf("Propose(%s): %v, want changeset_invalid", c.Action, err)
		}
		want := "the change-set " + id.String() + " that trusts the approver key " + name + " is proposed, not approved: approve it first"
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing could be approved again") {
			t.Errorf("Propose(%s): %q does not say %q", c.Action, err, want)
		}
		if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionApprove || r.Target != id.String() {
			t.Errorf("Propose(%s): remedy %+v, want the approval of %s", c.Action, r, id)
		}
	}
	awaiting(raise, open, "bob")
	if _, err := d.Approve(ctx, open, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, raise, "t")
	if err != nil {
		t.Fatalf("threshold 2 once bob is trusted: %v", err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	carol := registrytest.NewKey(t, "carol", registry.RoleApprover)
	tr, err = d.TrustKey(ctx, carol.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	awaiting(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "bob"}}, tr.ChangeSet.Metadata.ID, "carol")
}

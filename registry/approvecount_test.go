package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApprovalNoLongerCountingDoesNotBlock: threshold 2; a's approval
// of a change-set expires, then b and c approve it: two valid approvals
// reach the threshold and the pin is accepted. The expired approval's
// refusal kept the change-set proposed for ever ("2 of 2 approvals, not
// accepted yet: more approver keys must sign"). The same for an approval
// by a key untrusted since.
func TestApprovalNoLongerCountingDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	d, clock, k, _ := govDir(t, 2, "a", "b", "c", "x")
	a, b, c, x := k["a"], k["b"], k["c"], k["x"]
	var err error
	approve := func(id any, k registrytest.Key, exp *time.Time) *registry.ApproveResult {
		t.Helper()
		var cs *registry.ChangeSet
		switch v := id.(type) {
		case *registry.ChangeSet:
			cs = v
		case registry.Change:
			if cs, _, err = d.Propose(ctx, v, "t"); err != nil {
				t.Fatal(err)
			}
		}
		r, err := d.Approve(ctx, cs.Metadata.ID, k.Priv, exp)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// An approval that expired.
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	soon := clock.Add(time.Minute)
	if r := approve(cs, a, &soon); r.Accepted {
		t.Fatalf("one of two accepted")
	}
	*clock = clock.Add(time.Hour)
	approve(cs, b, nil)
	if r := approve(cs, c, nil); !r.Accepted || r.Approvals != 2 {
		t.Fatalf("b and c approved, a's approval expired: %d of %d, accepted %v", r.Approvals, r.Threshold, r.Accepted)
	}
	if _, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", *clock); err != nil {
		t.Fatalf("verify: %v", err)
	}

	// An approval by a key untrusted since.
	cs, _, err = d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(cs, x, nil)
	un, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "x"}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	approve(un, a, nil)
	approve(un, b, nil)
	approve(cs, b, nil)
	if r := approve(cs, c, nil); !r.Accepted || r.Approvals != 2 {
		t.Fatalf("b and c approved, x untrusted since: %d of %d, accepted %v", r.Approvals, r.Threshold, r.Accepted)
	}
	if p, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", *clock); err != nil || p.Revision != 2 {
		t.Fatalf("verify: %v", err)
	}
}

// TestExpiredApprovalNamed: a key trusted under two names (a, a2) signs
// as a; once its approval expires, pin_expired names it a, as the pin
// does, and says its code once ("pin_expired: provider …: approval by
// a2 expired …: pin_expired: …" named the other name and the code twice).
func TestExpiredApprovalNamed(t *testing.T) {
	ctx := context.Background()
	d, clock := clockedDir(t)
	var err error
	a := registrytest.NewKey(t, "a", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	a2 := a.Key
	a2.Name = "a2"
	tr, err := d.TrustKey(ctx, a2, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	soon := clock.Add(time.Minute)
	if _, err := d.Approve(ctx, cs.Metadata.ID, a.Priv, &soon); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", clock.Add(time.Hour))
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != refusal.PinExpired {
		t.Fatalf("got %v, want pin_expired", err)
	}
	if msg := err.Error(); strings.Count(msg, "pin_expired") != 1 || !strings.Contains(msg, "approval by a expired") {
		t.Errorf("pin_expired says %q", msg)
	}
}

// TestTrustFileGone: a registry whose trust.json is gone while its
// history accepted pins lost a file: registry_corrupt, not
// signer_untrusted (a signature by a key it does not trust).
func TestTrustFileGone(t *testing.T) {
	ctx := context.Background()
	d := acceptedRegistry(t, t.TempDir())
	if err := os.Remove(filepath.Join(d.Root(), "trust.json")); err != nil {
		t.Fatal(err)
	}
	_, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
}

// clockedDir is an empty Dir registry whose clock is the returned time,
// which the test moves.
func clockedDir(t *testing.T) (*registry.Dir, *time.Time) {
	t.Helper()
	d, err := registry.OpenDir(context.Background(), filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	d.Now = func() time.Time { return clock }
	return d, &clock
}

// TestTrustKeyNameTaken: trusting a name that is taken says what to do:
// the same key again has nothing to change, and says so (Already; it was
// refused "this very key … nothing to change", which an operator running
// key trust again after a kill could not tell from a failure); another
// key under a taken name is told to take another name or untrust the old
// one first. Both said only "a key named alice is already trusted".
func TestTrustKeyNameTaken(t *testing.T) {
	ctx := context.Background()
	d, _ := clockedDir(t)
	alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, alice.Key, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := d.TrustKey(ctx, alice.Key, "test")
	if err != nil || !res.Already || !res.Root || res.ChangeSet != nil {
		t.Errorf("the same key again: %+v %v", res, err)
	}
	other := registrytest.NewKey(t, "alice", registry.RoleApprover)
	_, err = d.TrustKey(ctx, other.Key, "test")
	wantRefusal(t, err, refusal.ChangesetInvalid)
	if r := refusal.RemedyOf(err); !strings.Contains(err.Error(), "under another name") || !strings.Contains(err.Error(), "untrust that one first") || r == nil || r.Action != refusal.ActionUntrustKey || r.Target != "alice" {
		t.Errorf("another key under the name: %v (remedy %+v, want untrust_key alice)", err, r)
	}
	// A change-set document that trusts this very key still has
	// nothing to change (Propose, as changeset propose does).
	_, _, err = d.Propose(ctx, registry.Change{Action: registry.ActionTrustKey, Key: &alice.Key}, "test")
	wantRefusal(t, err, refusal.ChangesetInvalid)
	if !strings.Contains(err.Error(), "this very key") || !strings.Contains(err.Error(), "nothing to change") {
		t.Errorf("a change-set trusting the same key again: %v", err)
	}
}

// TestEveryExpiredApprovalNamed: of a pin whose two approvals (threshold
// 2) both expired, pin_expired names both approvers and when each
// expired; it named the first alone, and the operator who had that
// approver renew was refused again for the second.
func TestEveryExpiredApprovalNamed(t *testing.T) {
	ctx := context.Background()
	d, clock := clockedDir(t)
	a := registrytest.NewKey(t, "a", registry.RoleApprover)
	b := registrytest.NewKey(t, "b", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() (*registry.ChangeSet, error){
		func() (*registry.ChangeSet, error) {
			tr, err := d.TrustKey(ctx, b.Key, "t")
			if err != nil {
				return nil, err
			}
			return tr.ChangeSet, nil
		},
		func() (*registry.ChangeSet, error) {
			cs, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "t")
			return cs, err
		},
	} {
		cs, err := step()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, a.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	first, second := clock.Add(time.Minute), clock.Add(2*time.Minute)
	for _, k := range []struct {
		key registrytest.Key
		exp *time.Time
	}{{a, &first}, {b, &second}} {
		if _, err := d.Approve(ctx, cs.Metadata.ID, k.key.Priv, k.exp); err != nil {
			t.Fatal(err)
		}
	}
	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", clock.Add(time.Hour))
	if refusal.CodeOf(err) != refusal.PinExpired {
		t.Fatalf("got %v, want pin_expired", err)
	}
	want := "0 of 2 approvals unexpired: approvals by a (expired at " + first.Format(time.RFC3339) + ") and b (expired at " + second.Format(time.RFC3339) + "); "
	if !strings.Contains(err.Error(), want) {
		t.Errorf("pin_expired says %q, want it to say %q", err, want)
	}
}

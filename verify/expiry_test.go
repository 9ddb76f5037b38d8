package verify_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/verify"
)

// TestValidUntil: CheckPin says when the pin stops verifying by time
// alone, which is what an executor that watches instead of verifying
// (package watch) must check on every call, since an expiry changes no
// file. It is when too few approvals remain for the threshold, not the
// first approval's expiry, and it agrees with registry.VerifyPin.
func TestValidUntil(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	k2 := registrytest.NewKey(t, "k2", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	approve := func(c registry.Change, exp []*time.Time, keys ...registrytest.Key) {
		t.Helper()
		cs, _, err := d.Propose(ctx, c, "t")
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if _, err := d.Approve(ctx, cs.Metadata.ID, k.Priv, exp[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	tr, err := d.TrustKey(ctx, k2.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, root.Priv, nil); err != nil {
		t.Fatal(err)
	}
	policy := func(n int) registry.Change {
		return registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: n}}
	}
	now := time.Now().UTC().Truncate(time.Second)
	t1, t2 := now.Add(time.Hour), now.Add(2*time.Hour)
	state := t.TempDir()
	check := func(want time.Time) {
		t.Helper()
		acc, err := verify.CheckPin(ctx, d, "acme-echo", verify.Options{StateDir: state, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if !acc.ValidUntil.Equal(want) {
			t.Fatalf("ValidUntil %v, want %v", acc.ValidUntil, want)
		}
		if want.IsZero() {
			return
		}
		if _, err := registry.VerifyPin(ctx, d, "", "acme-echo", want.Add(-time.Second)); err != nil {
			t.Errorf("VerifyPin just before ValidUntil: %v", err)
		}
		_, perr := registry.VerifyPin(ctx, d, "", "acme-echo", want)
		if !errors.Is(perr, refusal.PinExpired) {
			t.Errorf("VerifyPin at ValidUntil: %v, want pin_expired", perr)
		}
		rep := &verify.Report{Provider: "acme-echo", ValidUntil: acc.ValidUntil, Pin: acc.Pin}
		if err := rep.Unexpired(want.Add(-time.Second)); err != nil {
			t.Errorf("Unexpired before: %v", err)
		}
		err = rep.Unexpired(want)
		if !errors.Is(err, refusal.PinExpired) {
			t.Errorf("Unexpired at ValidUntil: %v, want pin_expired", err)
		}
		// The same next step as VerifyPin's: renew the approvals of the
		// pin's change-set (it had no remedy, so a watching executor
		// had nothing to pass on).
		got, wantR := refusal.RemedyOf(err), refusal.RemedyOf(perr)
		if got == nil || wantR == nil || got.Action != refusal.ActionRenewApproval || got.Target != wantR.Target || got.Target != acc.Pin.SpecDigest.String() {
			t.Errorf("Unexpired's remedy %+v, want VerifyPin's %+v", got, wantR)
		}
		if err != nil && !strings.Contains(err.Error(), acc.Pin.SpecDigest.String()) {
			t.Errorf("Unexpired's detail %q does not name the change-set to approve again", err)
		}
	}

	// Threshold 2, approvals expiring at t1 and t2: valid until t1.
	approve(policy(2), []*time.Time{nil}, root)
	approve(registrytest.Change("acme-echo", "1.0"), []*time.Time{&t1, &t2}, root, k2)
	check(t1)
	// The threshold lowered to 1: the same pin is valid until t2.
	approve(policy(1), []*time.Time{nil, nil}, root, k2)
	check(t2)
	// An approval without expiry: valid with no end.
	approve(registrytest.Change("acme-echo", "2.0"), []*time.Time{nil}, root)
	check(time.Time{})
}

package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestRenewExpiredApproval: approving the accepted pin's change-set again
// with a key whose approval expired is a new approval that counts, with
// its new expiry, recorded in the history; verify then accepts the pin
// (the chain and the history's last pin entry still match it). Before,
// the approve said "approved already … accepted" and the pin stayed
// expired. An approval that no longer reaches the threshold is never
// reported accepted, an old expired approval put back does not make the
// pin run, and a change-set replaced since cannot be renewed into place.
func TestRenewExpiredApproval(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	clock := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	d.Now = func() time.Time { return clock }
	a := registrytest.NewKey(t, "a", registry.RoleApprover)
	b := registrytest.NewKey(t, "b", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	id := cs.Metadata.ID
	exp := clock.Add(time.Hour)
	if res, err := d.Approve(ctx, id, a.Priv, &exp); err != nil || !res.Accepted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	expiredPin, _ := os.ReadFile(filepath.Join(d.Root(), "pins", "acme-echo.json"))

	clock = clock.Add(90 * time.Minute) // a's approval expired 30 minutes ago
	_, err = registry.VerifyPin(ctx, d, state, "acme-echo", clock)
	if refusal.CodeOf(err) != refusal.PinExpired {
		t.Fatalf("verify with the approval expired: %v", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionRenewApproval || rem.Target != id.String() {
		t.Errorf("pin_expired carries remedy %+v, want %s %s", rem, refusal.ActionRenewApproval, id)
	}

	// The renewal: a new approval with its new expiry, recorded.
	logBefore, _ := d.Log(ctx)
	exp2 := clock.Add(time.Hour)
	res, err := d.Approve(ctx, id, a.Priv, &exp2)
	if err != nil || !res.Renewed || res.Already || !res.Accepted || res.Approvals != 1 || res.Pin == nil || res.Pin.Revision != 1 {
		t.Fatalf("renew: %+v %v", res, err)
	}
	if len(res.Pin.Approvals) != 1 || res.Pin.Approvals[0].Expires == nil || !res.Pin.Approvals[0].Expires.Equal(exp2) {
		t.Errorf("the renewed pin's approvals: %+v", res.Pin.Approvals)
	}
	logAfter, _ := d.Log(ctx)
	if len(logAfter) != len(logBefore)+1 || logAfter[len(logAfter)-1].Event != registry.EventChangeSetApproved || !strings.Contains(logAfter[len(logAfter)-1].Detail, "renewal") {
		t.Errorf("the history after the renewal: %+v", logAfter[len(logBefore):])
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", clock); err != nil {
		t.Fatalf("verify after the renewal: %v", err)
	}
	if err := registry.VerifyTrust(ctx, d); err != nil {
		t.Fatal(err)
	}
	// The same approve again, unexpired: nothing changes.
	if res, err := d.Approve(ctx, id, a.Priv, nil); err != nil || !res.Already || !res.Accepted || res.Renewed {
		t.Fatalf("approve again, unexpired: %+v %v", res, err)
	}

	// The pin file from before the renewal, put back: its approval
	// is still the expired one it signed.
	pinPath := filepath.Join(d.Root(), "pins", "acme-echo.json")
	renewed, _ := os.ReadFile(pinPath)
	os.WriteFile(pinPath, expiredPin, 0o644)
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", clock); refusal.CodeOf(err) != refusal.PinExpired {
		t.Errorf("the expired pin put back: %v", err)
	}
	os.WriteFile(pinPath, renewed, 0o644)

	// Threshold 2 (b trusted): a's approval counts, but the pin
	// approved by a alone is below the threshold; an approve again by a
	// is not "accepted".
	tr, err := d.TrustKey(ctx, b.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatal(err)
	}
	pol, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, pol.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Approve(ctx, id, a.Priv, nil); err != nil || res.Accepted || res.Approvals != 1 || res.Threshold != 2 {
		t.Fatalf("approve again below the threshold: %+v %v", res, err)
	}
	// Renewed below the threshold: counted, not accepted.
	clock = clock.Add(2 * time.Hour)
	if res, err := d.Approve(ctx, id, a.Priv, nil); err != nil || !res.Renewed || res.Accepted || res.Approvals != 1 || res.Threshold != 2 {
		t.Fatalf("renew below the threshold: %+v %v", res, err)
	}

	// A change-set replaced since cannot be renewed back into place.
	cs2, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	exp3 := clock.Add(time.Minute)
	for _, k := range []registrytest.Key{a, b} {
		if _, err := d.Approve(ctx, cs2.Metadata.ID, k.Priv, &exp3); err != nil {
			t.Fatal(err)
		}
	}
	clock = clock.Add(time.Hour)
	if _, err := d.Approve(ctx, id, b.Priv, nil); refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Errorf("renewing the replaced change-set: %v", err)
	}
	if p, err := d.Pin(ctx, "acme-echo"); err != nil || p.Revision != 2 {
		t.Fatalf("the pin: %+v %v", p, err)
	}
	for _, k := range []registrytest.Key{a, b} {
		if _, err := d.Approve(ctx, cs2.Metadata.ID, k.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", clock); err != nil {
		t.Fatalf("verify revision 2 renewed by both keys: %v", err)
	}
}

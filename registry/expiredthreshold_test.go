package registry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestVerifyPinExpiredBelowRaisedThreshold: alice's approval expired and
// the threshold was raised to 2 since: renewing it would leave 1 of 2,
// so the pin is pin_unapproved (which may mention the expiry), not
// pin_expired, whose advice — renew — does not make it runnable.
func TestVerifyPinExpiredBelowRaisedThreshold(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t, 1, "alice", "bob", "carol")
	exp := clock.Add(time.Minute)
	approve(registrytest.Change("acme-echo", "1.0"), &exp, k["alice"])
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, k["alice"])
	*clock = clock.Add(time.Hour)
	_, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock)
	wantRefusal(t, err, refusal.PinUnapproved)
	if !registry.NotRunnable(err) || !strings.Contains(err.Error(), "0 of 2") || !strings.Contains(err.Error(), "1 expired") {
		t.Errorf("refusal: %v", err)
	}
	// With the threshold at 1, renewing is enough: pin_expired.
	d2, clock2, k2, approve2 := govDir(t, 1, "alice", "bob", "carol")
	exp2 := clock2.Add(time.Minute)
	approve2(registrytest.Change("acme-echo", "1.0"), &exp2, k2["alice"])
	*clock2 = clock2.Add(time.Hour)
	_, err = registry.VerifyPin(ctx, d2, "", "acme-echo", *clock2)
	wantRefusal(t, err, refusal.PinExpired)
	if !registry.NotRunnable(err) {
		t.Errorf("pin_expired is a state: %v", err)
	}
}

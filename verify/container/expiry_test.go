package container_test

import (
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify/container"
)

// TestUnexpired: a container report refuses pin_expired from its
// ValidUntil on, as verify.Report does, with the remedy that renews the
// pin's approvals; zero never expires.
func TestUnexpired(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cs := digest.Sum([]byte("the pin's change-set"))
	r := &container.Report{Provider: "acme-echo", Revision: 2, ValidUntil: at, Pin: &registry.Pin{SpecDigest: cs}}
	if err := r.Unexpired(at.Add(-time.Second)); err != nil {
		t.Errorf("before: %v", err)
	}
	err := r.Unexpired(at)
	if refusal.CodeOf(err) != refusal.PinExpired {
		t.Errorf("at ValidUntil: %v", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionRenewApproval || rem.Target != cs.String() {
		t.Errorf("at ValidUntil: remedy %+v, want %s of the pin's change-set", rem, refusal.ActionRenewApproval)
	}
	if err := (&container.Report{}).Unexpired(at); err != nil {
		t.Errorf("no expiry: %v", err)
	}
}

package container_test

import (
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/verify/container"
)

// TestUnexpired: a container report refuses pin_expired from its
// ValidUntil on, as verify.Report does; zero never expires.
func TestUnexpired(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r := &container.Report{Provider: "acme-echo", Revision: 2, ValidUntil: at}
	if err := r.Unexpired(at.Add(-time.Second)); err != nil {
		t.Errorf("before: %v", err)
	}
	if err := r.Unexpired(at); refusal.CodeOf(err) != refusal.PinExpired {
		t.Errorf("at ValidUntil: %v", err)
	}
	if err := (&container.Report{}).Unexpired(at); err != nil {
		t.Errorf("no expiry: %v", err)
	}
}

package registry_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestPinNameNotNormalized: pins are named by the PEP 503 normalized
// name. A variant of it (the wheel's distribution name Acme_Echo, a run
// of separators acme..echo) is refused pin_unapproved naming the name to
// give, in a Dir and a Stub alike. Before, a Dir said "Acme_Echo" "is not
// a provider name" with no next step, and "acme..echo" "has no accepted
// pin" though acme-echo had one; a Stub said the latter for both.
func TestPinNameNotNormalized(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	for name, reg := range map[string]registry.Registry{"dir": d, "stub": registry.NewStub()} {
		key := registrytest.NewKey(t, "root", registry.RoleApprover)
		if _, err := reg.TrustKey(ctx, key.Key, "t"); err != nil {
			t.Fatal(err)
		}
		cs, _, err := reg.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Approve(ctx, cs.Metadata.ID, key.Priv, nil); err != nil {
			t.Fatal(err)
		}
		for _, variant := range []string{"Acme_Echo", "acme..echo", "acme_echo", "ACME.ECHO"} {
			_, err := reg.Pin(ctx, variant)
			if refusal.CodeOf(err) != refusal.PinUnapproved || !strings.Contains(err.Error(), "give acme-echo") {
				t.Errorf("%s: Pin(%q) = %v, want pin_unapproved naming acme-echo", name, variant, err)
			}
		}
		if _, err := reg.Pin(ctx, "acme-echo"); err != nil {
			t.Errorf("%s: Pin(acme-echo): %v", name, err)
		}
	}
}

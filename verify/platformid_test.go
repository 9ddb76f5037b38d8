package verify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/verify"
)

// TestPlatformThatCannotBeOne: a --platform that is no platform at all
// ("garbage") is refused platform_unsupported, advising the list of
// presets, before the pin is looked up (in a registry with no pin too);
// it was refused pin_unapproved, advising to propose the provider again
// "for garbage". A platform id the pin has no materialization for stays
// pin_unapproved.
func TestPlatformThatCannotBeOne(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(base, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	// No pin yet: the platform is refused first.
	if _, err := verify.CheckPin(ctx, d, "acme-echo", verify.Options{StateDir: state, Platform: "garbage"}); refusal.CodeOf(err) != refusal.PlatformUnsupported {
		t.Fatalf("garbage, no pin: %v, want platform_unsupported", err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	registrytest.Accept(t, d, registrytest.Change("acme-echo", "1.0"), root)
	_, err = verify.Verify(ctx, d, "acme-echo", verify.Options{StateDir: state, Platform: "garbage"})
	if refusal.CodeOf(err) != refusal.PlatformUnsupported {
		t.Fatalf("garbage: %v, want platform_unsupported", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPlatformList {
		t.Fatalf("garbage: remedy %+v, want platform_list", r)
	}
	for _, p := range []string{"cp312-manylinux_2_17_aarch64", "host"} {
		_, err = verify.Verify(ctx, d, "acme-echo", verify.Options{StateDir: state, Platform: p})
		if refusal.CodeOf(err) != refusal.PinUnapproved {
			t.Fatalf("%s: %v, want pin_unapproved (the pin has no materialization for it)", p, err)
		}
	}
}

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

// TestNamedByLostPin: when one pin file is lost, or an older one is put
// back, NamedBy (what gc keeps) is registry_corrupt advising repair_registry,
// and names again what the pin names once Repair wrote it. Before, it
// named nothing for the lost pin (gc --envs removed the env and wheels of
// the pin the history accepted, which repair then wrote back) and the
// older pin's env in place of the accepted one's.
func TestNamedByLostPin(t *testing.T) {
	ctx := context.Background()
	d := acceptedRegistry(t, t.TempDir())
	want, err := registry.NamedBy(ctx, d)
	if err != nil || len(want.Envs) == 0 {
		t.Fatalf("NamedBy: %+v, %v", want, err)
	}
	pinPath := filepath.Join(d.Root(), "pins", "acme-echo.json")
	if err := os.Remove(pinPath); err != nil {
		t.Fatal(err)
	}
	n, err := registry.NamedBy(ctx, d)
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != refusal.RegistryCorrupt || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry {
		t.Fatalf("pin file lost: NamedBy = %+v, %v; want registry_corrupt advising repair_registry", n, err)
	}
	if _, err := d.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := registry.NamedBy(ctx, d)
	if err != nil || len(got.Envs) != len(want.Envs) || got.Envs[0] != want.Envs[0] {
		t.Errorf("repaired: NamedBy = %+v, %v; want %+v", got, err, want)
	}
}

// TestVerifyPinLostPin: a pin file lost from a registry whose history
// accepted it is registry_corrupt for VerifyPin too (what every
// executor's verify calls), and an older one put back pin_rollback, each
// advising repair while the history's change-set is there to restore it
// from, else a copy of the registry, as for every mutation
// (docs/governance.md). A lost pin file read as a provider never
// approved, pin_unapproved advising the change-set list, and the older
// one had no advice.
func TestVerifyPinLostPin(t *testing.T) {
	ctx := context.Background()
	d, accept := acmeEchoDir(t)
	verify := func() (*refusal.Error, error) {
		_, err := registry.VerifyPin(ctx, d, "", "acme-echo", time.Now())
		var r *refusal.Error
		errors.As(err, &r)
		return r, err
	}
	accept("1.0")
	pinPath := filepath.Join(d.Root(), "pins", "acme-echo.json")
	pin1, err := os.ReadFile(pinPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pinPath); err != nil {
		t.Fatal(err)
	}
	if r, err := verify(); r == nil || r.Code != refusal.RegistryCorrupt || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry ||
		!strings.Contains(r.Detail, "the pin file was lost. The change-set the history accepted") {
		t.Fatalf("pin file lost: VerifyPin = %v; want registry_corrupt advising repair_registry", err)
	}
	// A provider the history never accepted is still not approved.
	if _, err := registry.VerifyPin(ctx, d, "", "acme-other", time.Now()); !errors.Is(err, refusal.PinUnapproved) {
		t.Errorf("a provider never accepted: %v", err)
	}
	if _, err := d.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(); err != nil {
		t.Fatalf("repaired: %v", err)
	}
	// An older pin file put back: a rollback, repaired the same way.
	accept("2.0")
	if err := os.WriteFile(pinPath, pin1, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := verify(); r == nil || r.Code != refusal.PinRollback || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry {
		t.Fatalf("an older pin put back: VerifyPin = %v; want pin_rollback advising repair_registry", err)
	}
	// Without the change-set to restore it from: a copy of the registry.
	cs, err := d.ChangeSets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Spec.Revision == 2 {
			os.Remove(filepath.Join(d.Root(), "changesets", c.Metadata.ID.Hex()+".yaml"))
		}
	}
	if r, err := verify(); r == nil || r.Code != refusal.PinRollback || r.Remedy != nil || !strings.Contains(r.Detail, "is not in changesets/ to restore it from: restore pins/acme-echo.json and changesets/ from a copy of the registry") {
		t.Fatalf("an older pin put back, its change-set gone: VerifyPin = %v", err)
	}
}

// TestVerifyPinPutBackBehindFloor: an older pin file put back is refused
// pin_rollback by a verifier whose floor saw the newer pin (every
// executor's, with a state directory) advising repair while the history's
// change-set is there, else a copy of the registry, as without a floor.
// Its floor's refusal came first and said only "this verifier accepted
// revision N", with nothing to do next.
func TestVerifyPinPutBackBehindFloor(t *testing.T) {
	ctx := context.Background()
	d, accept := acmeEchoDir(t)
	stateDir := t.TempDir()
	verify := func() (*refusal.Error, error) {
		_, err := registry.VerifyPin(ctx, d, stateDir, "acme-echo", time.Now())
		var r *refusal.Error
		errors.As(err, &r)
		return r, err
	}
	accept("1.0")
	pinPath := filepath.Join(d.Root(), "pins", "acme-echo.json")
	pin1, err := os.ReadFile(pinPath)
	if err != nil {
		t.Fatal(err)
	}
	accept("2.0")
	if _, err := verify(); err != nil {
		t.Fatalf("revision 2: %v", err) // raises the floor to it
	}
	if err := os.WriteFile(pinPath, pin1, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := verify(); r == nil || r.Code != refusal.PinRollback || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry ||
		!strings.Contains(r.Detail, "this verifier accepted revision 2") || !strings.Contains(r.Detail, "an older pin file was put back") {
		t.Fatalf("an older pin put back behind the floor: VerifyPin = %v; want pin_rollback advising repair_registry", err)
	}
	if _, err := d.Repair(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(); err != nil {
		t.Fatalf("repaired as advised: %v", err)
	}
	// Without the change-set to restore it from: a copy of the registry.
	if err := os.WriteFile(pinPath, pin1, 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := d.ChangeSets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Spec.Revision == 2 {
			os.Remove(filepath.Join(d.Root(), "changesets", c.Metadata.ID.Hex()+".yaml"))
		}
	}
	if r, err := verify(); r == nil || r.Code != refusal.PinRollback || r.Remedy != nil || !strings.Contains(r.Detail, "restore pins/acme-echo.json and changesets/ from a copy of the registry") {
		t.Fatalf("an older pin put back behind the floor, its change-set gone: VerifyPin = %v", err)
	}
}

// acmeEchoDir is a Dir registry trusting one approver, and accept, which
// proposes acme-echo at version v (registered at 1.0, updated after) and
// approves it with that key.
func acmeEchoDir(t *testing.T) (*registry.Dir, func(v string)) {
	t.Helper()
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	return d, func(v string) {
		t.Helper()
		c := registrytest.Change("acme-echo", v)
		if v != "1.0" {
			c.Action = registry.ActionUpdate
		}
		cs, _, err := d.Propose(ctx, c, "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
}

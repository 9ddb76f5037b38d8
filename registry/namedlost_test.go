package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
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

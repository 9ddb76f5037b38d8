package registry_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestPinDisplayFieldsEdited: what a pin says that no signature covers —
// its acceptedAt, an approval's name and time — is held to what the
// history recorded. Each edit is registry_corrupt advising repair, to
// VerifyPin (what verify prints with --json), to CheckedPin (provider
// show) and to a change of the provider; Repair writes the pin again as
// accepted, and it verifies. Before, each edit verified and was shown
// as edited (an approval dated a year back, under another key's name).
func TestPinDisplayFieldsEdited(t *testing.T) {
	ctx := context.Background()
	twoApprovals := func(m map[string]any) {
		aps := m["approvals"].([]any)
		m["approvals"] = append(aps, aps[0])
	}
	for name, edit := range map[string]func(m map[string]any){
		"acceptedAt":     func(m map[string]any) { m["acceptedAt"] = "2020-01-01T00:00:00Z" },
		"approval name":  func(m map[string]any) { m["approvals"].([]any)[0].(map[string]any)["name"] = "alice" },
		"approval time":  func(m map[string]any) { m["approvals"].([]any)[0].(map[string]any)["at"] = "2020-01-01T00:00:00Z" },
		"approval twice": twoApprovals,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			before, _ := os.ReadFile(f.pinPath())
			editPin(t, f, edit)
			wantRepair := func(what string, err error) {
				t.Helper()
				var r *refusal.Error
				if !errors.As(err, &r) || r.Code != refusal.RegistryCorrupt || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry {
					t.Errorf("%s: %v, want registry_corrupt advising repair_registry", what, err)
				}
			}
			_, err := registry.VerifyPin(ctx, f.dir, f.state, "acme-echo", time.Now())
			wantRepair("VerifyPin", err)
			_, err = registry.VerifyPin(ctx, f.dir, t.TempDir(), "acme-echo", time.Now())
			wantRepair("VerifyPin without a floor", err)
			_, err = registry.CheckedPin(ctx, f.dir, "acme-echo")
			wantRepair("CheckedPin", err)
			_, err = registry.CheckedPins(ctx, f.dir)
			wantRepair("CheckedPins", err)
			_, _, err = f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
			wantRepair("Propose on it", err)
			if r, err := f.dir.Repair(ctx); err != nil || len(r.Pins) != 1 {
				t.Fatalf("Repair: %+v, %v", r, err)
			}
			if after, _ := os.ReadFile(f.pinPath()); !bytes.Equal(after, before) {
				t.Errorf("the pin repaired:\n%s\nwant\n%s", after, before)
			}
			if _, err := registry.VerifyPin(ctx, f.dir, f.state, "acme-echo", time.Now()); err != nil {
				t.Errorf("VerifyPin after Repair: %v", err)
			}
			if ps, err := registry.CheckedPins(ctx, f.dir); err != nil || len(ps) != 1 {
				t.Errorf("CheckedPins after Repair: %v, %v", ps, err)
			}
			if err := os.Remove(f.pinPath()); err != nil {
				t.Fatal(err)
			}
			_, err = registry.CheckedPins(ctx, f.dir)
			wantRepair("CheckedPins, the pin lost", err)
		})
	}
}

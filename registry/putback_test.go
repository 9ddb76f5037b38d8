package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestPinPutBackNotBuiltOn: an older pin file put back (revision 1, after
// revision 2 was accepted) is refused by every mutation that reads the
// pin — a proposal, a retire, an approval of a change-set built on it —
// so no second pin is accepted at one revision; Repair writes the pin the
// history holds again from its change-set, and changes continue from it.
// Before, the proposal took revision 1 from the file as its base, and
// its approval accepted a second pin at revision 2.
func TestPinPutBackNotBuiltOn(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	key := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, key.Key, "t"); err != nil {
		t.Fatal(err)
	}
	first, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, first.Metadata.ID, key.Priv, nil); err != nil {
		t.Fatal(err)
	}
	pinPath := filepath.Join(d.Root(), "pins", "acme-echo.json")
	old, err := os.ReadFile(pinPath)
	if err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, key.Priv, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	wantRefusal(t, err, refusal.PinRollback)
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionRepairRegistry {
		t.Errorf("the refusal's remedy is %+v, want %s", rem, refusal.ActionRepairRegistry)
	}
	_, _, err = d.Propose(ctx, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, "t")
	wantRefusal(t, err, refusal.PinRollback)
	_, err = d.Approve(ctx, cs.Metadata.ID, key.Priv, nil)
	wantRefusal(t, err, refusal.PinRollback)
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatalf("the history is whole: %v", err)
	}

	r, err := d.Repair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pins) != 1 || r.Pins[0] != "acme-echo" {
		t.Fatalf("repaired %+v, want the pin of acme-echo", r)
	}
	p, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	if err != nil || p.Revision != 2 || p.SpecDigest != cs.Metadata.ID {
		t.Fatalf("after repair: %v, %+v; want revision 2, %s", err, p, cs.Metadata.ID)
	}
	ret, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if ret.Spec.Revision != 3 || ret.Spec.Base != cs.Metadata.ID {
		t.Fatalf("retire after repair: base %s revision %d, want %s revision 3", ret.Spec.Base, ret.Spec.Revision, cs.Metadata.ID)
	}
}

// TestVerifyHistoryPinRevisions: a provider's pin entries at one
// revision twice (what a change built on a put-back pin file made: a
// pin-retired after a pin-accepted, both at revision 2) is
// registry_corrupt to VerifyHistory, which `registry log --verify` runs
// over every provider, retired ones too; and to VerifyPin.
func TestVerifyHistoryPinRevisions(t *testing.T) {
	ctx := context.Background()
	d := acceptedRegistry(t, t.TempDir())
	log, err := d.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1]
	if last.Event != registry.EventPinAccepted {
		t.Fatalf("last entry %s", last.Event)
	}
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatal(err)
	}
	appendEntryAt(t, filepath.Join(d.Root(), "log.jsonl"), registry.Entry{Event: registry.EventPinAccepted, Subject: "acme-echo", Digest: last.Digest, Revision: last.Revision})
	wantRefusal(t, registry.VerifyHistory(ctx, d), refusal.RegistryCorrupt)
	_, err = registry.VerifyPin(ctx, d, "", "acme-echo", time.Now())
	wantRefusal(t, err, refusal.RegistryCorrupt)
}

package registry_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestRepairRebuildsLostTrust: a trust.json deleted could not be made
// again, though the history records every governance step and
// changesets/ holds each step's approved change-set (the keys it trusted,
// the approvals): repair refused it (registry_corrupt: restore it from a
// copy). RepairWith, given the root of trust's public key (which only
// trust.json held), makes it again byte for byte, under the lock and
// through the journal, and the registry verifies and takes changes again.
// Without the key, or with another, it is refused and nothing is written;
// a trust.json that is there and edited is not rebuilt but refused.
func TestRepairRebuildsLostTrust(t *testing.T) {
	ctx := context.Background()
	d, clock, keys, approve := govDir(t, 2, "alice", "bob", "carol")
	alice, bob, carol := keys["alice"], keys["bob"], keys["carol"]
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "carol", Digest: carol.Key.Digest}}, nil, alice, bob)
	approve(registrytest.Change("acme-echo", "1.0"), nil, alice, bob)
	tf := filepath.Join(d.Root(), "trust.json")
	want, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tf); err != nil {
		t.Fatal(err)
	}
	missing := func(what string) {
		t.Helper()
		if _, err := os.Stat(tf); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: trust.json written (%v)", what, err)
		}
	}
	// Without the root's key: refused, saying which key repairs it.
	_, err = d.Repair(ctx)
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != refusal.RegistryCorrupt || r.Remedy == nil || r.Remedy.Action != refusal.ActionRepairRegistry || r.Remedy.Target != alice.Key.Digest.String() {
		t.Errorf("Repair without the root key: %v; want registry_corrupt with the repair naming %s", err, alice.Key.Digest)
	}
	missing("without the root key")
	if _, err := d.RepairWith(ctx, registry.RepairOptions{RootKey: []byte(bob.Key.PEM)}); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("RepairWith another key: %v; want registry_corrupt", err)
	}
	missing("with another key")
	res, err := d.RepairWith(ctx, registry.RepairOptions{RootKey: []byte(alice.Key.PEM)})
	if err != nil || !res.Trust {
		t.Fatalf("RepairWith the root key: %+v, %v", res, err)
	}
	got, err := os.ReadFile(tf)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("trust.json made again differs: %v\n got %s\nwant %s", err, got, want)
	}
	if st, err := os.Stat(tf); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("trust.json: %v %v", st, err)
	}
	if _, _, err := registry.Audit(ctx, d, *clock); err != nil {
		t.Errorf("Audit after the repair: %v", err)
	}
	if _, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", *clock); err != nil {
		t.Errorf("VerifyPin after the repair: %v", err)
	}
	approve(registrytest.Change("acme-echo", "2.0"), nil, alice, bob) // changes go on
	if res, err := d.Repair(ctx); err != nil || res.Trust {
		t.Errorf("Repair again: %+v, %v; want nothing written", res, err)
	}

	// One that is there, edited (the threshold lowered), is not made
	// again over: refused as before.
	edited := bytes.Replace(got, []byte(`"threshold": 2`), []byte(`"threshold": 1`), 1)
	if bytes.Equal(edited, got) {
		t.Fatalf("no threshold in %s", got)
	}
	if err := os.WriteFile(tf, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RepairWith(ctx, registry.RepairOptions{RootKey: []byte(alice.Key.PEM)}); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("RepairWith over an edited trust.json: %v; want registry_corrupt", err)
	}
	if b, _ := os.ReadFile(tf); !bytes.Equal(b, edited) {
		t.Errorf("the edited trust.json was written over")
	}
}

// TestRepairTrustNeedsEveryStep: a governance step's change-set gone from
// changesets/ leaves trust.json lost unrepairable: refused, naming the
// step, and nothing written.
func TestRepairTrustNeedsEveryStep(t *testing.T) {
	ctx := context.Background()
	d, _, keys, _ := govDir(t, 1, "alice", "bob")
	cs, err := d.ChangeSets(ctx)
	if err != nil || len(cs) != 1 {
		t.Fatalf("%d change-sets, %v", len(cs), err)
	}
	os.Remove(filepath.Join(d.Root(), "changesets", cs[0].Metadata.ID.Hex()+".yaml"))
	tf := filepath.Join(d.Root(), "trust.json")
	os.Remove(tf)
	if _, err := d.RepairWith(ctx, registry.RepairOptions{RootKey: []byte(keys["alice"].Key.PEM)}); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("RepairWith, a step's change-set gone: %v; want registry_corrupt", err)
	}
	if _, err := os.Stat(tf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trust.json written: %v", err)
	}
}

// TestRepairTrustRootTrustedAgain: a root of trust untrusted and trusted
// again since has its key in that change-set: repair needs no key given.
func TestRepairTrustRootTrustedAgain(t *testing.T) {
	ctx := context.Background()
	d, alice, bob := aliceRoot(t)
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionTrustKey, Key: &bob.Key}, alice)
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice", Digest: alice.Key.Digest}}, bob)
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionTrustKey, Key: &alice.Key}, bob)
	tf := filepath.Join(d.Root(), "trust.json")
	want, _ := os.ReadFile(tf)
	os.Remove(tf)
	if res, err := d.Repair(ctx); err != nil || !res.Trust {
		t.Fatalf("Repair: %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(tf); !bytes.Equal(got, want) {
		t.Errorf("trust.json made again differs:\n got %s\nwant %s", got, want)
	}
}

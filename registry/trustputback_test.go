package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestTrustPutBackNotBuiltOn: a trust.json removed, or put back from
// before a governance step, is refused registry_corrupt by every
// mutation that reads the trust state, and the history gains no entry.
// Before, with trust.json removed, TrustKey made another key a second
// root of trust; with an older one put back, a proposal and its
// approval were accepted on it (the registry's history then forked from
// its trust state for good).
func TestTrustPutBackNotBuiltOn(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	a := registrytest.NewKey(t, "alice", registry.RoleApprover)
	b := registrytest.NewKey(t, "bob", registry.RoleApprover)
	m := registrytest.NewKey(t, "mallory", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	trustPath := filepath.Join(d.Root(), "trust.json")
	old, err := os.ReadFile(trustPath)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := d.TrustKey(ctx, b.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, tr.ChangeSet.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(trustPath)
	if err != nil {
		t.Fatal(err)
	}
	length := func() int {
		t.Helper()
		c, err := d.Chain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	n := length()
	check := func(what string, err error) {
		t.Helper()
		if refusal.CodeOf(err) != refusal.RegistryCorrupt {
			t.Errorf("%s: %v, want registry_corrupt", what, err)
		}
		if l := length(); l != n {
			t.Errorf("%s: the history went from %d to %d entries", what, n, l)
		}
	}

	if err := os.Remove(trustPath); err != nil {
		t.Fatal(err)
	}
	_, err = d.TrustKey(ctx, m.Key, "t")
	check("trust.json removed: key trust", err)

	if err := os.WriteFile(trustPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.TrustKey(ctx, m.Key, "t")
	check("trust.json put back: key trust", err)
	_, _, err = d.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t")
	check("trust.json put back: propose", err)
	_, err = d.Approve(ctx, cs.Metadata.ID, a.Priv, nil)
	check("trust.json put back: approve", err)

	if err := os.WriteFile(trustPath, cur, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// TestTrustLostReadRefused: a Dir whose trust.json was removed after the
// history recorded its root of trust answers Trust with registry_corrupt.
// Before, it answered nil, a registry that trusts no key: `key list`
// listed none and `policy show` said threshold 1 (it was 2) with exit 0.
func TestTrustLostReadRefused(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if tr, err := d.Trust(ctx); err != nil || tr != nil {
		t.Fatalf("a new registry: trust %v, %v; want none", tr, err)
	}
	a := registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d.Root(), "trust.json")); err != nil {
		t.Fatal(err)
	}
	if tr, err := d.Trust(ctx); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("trust.json lost: Trust = %v, %v; want registry_corrupt", tr, err)
	}
}

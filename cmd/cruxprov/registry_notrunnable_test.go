package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestRegistryLogVerifyUntrustedApprover: after a key rotation (alice,
// who approved acme-echo with bob at threshold 2, untrusted by bob and
// carol) `registry log --verify` lists acme-echo as not runnable
// (signer_untrusted, naming alice) and exits 0, its --json with the
// entries and the registry id; `verify acme-echo` refuses it naming alice
// and advising to propose it again. Before, the audit failed (exit 78)
// on the refusal, and its --json had nothing else.
func TestRegistryLogVerifyUntrustedApprover(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]registrytest.Key{}
	for _, n := range []string{"alice", "bob", "carol"} {
		k[n] = registrytest.NewKey(t, n, registry.RoleApprover)
	}
	approve := func(c registry.Change, by ...string) {
		t.Helper()
		cs, _, err := d.Propose(ctx, c, "t")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range by {
			if _, err := d.Approve(ctx, cs.Metadata.ID, k[n].Priv, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.TrustKey(ctx, k["alice"].Key, "t"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"bob", "carol"} {
		key := k[n].Key
		approve(registry.Change{Action: registry.ActionTrustKey, Key: &key}, "alice")
	}
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, "alice")
	approve(registrytest.Change("acme-echo", "1.0"), "alice", "bob")
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice"}}, "bob", "carol")

	r := cruxprov(t, "--home", home, "registry", "log", "--verify", "--json")
	var doc struct {
		RegistryID  string `json:"registry_id"`
		Entries     []json.RawMessage
		Verified    bool
		NotRunnable []struct{ Provider, Code, Detail string } `json:"not_runnable"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.RegistryID == "" || len(doc.Entries) == 0 || !doc.Verified ||
		len(doc.NotRunnable) != 1 || doc.NotRunnable[0].Provider != "acme-echo" || doc.NotRunnable[0].Code != "signer_untrusted" ||
		!strings.Contains(doc.NotRunnable[0].Detail, "alice") {
		t.Fatalf("registry log --verify --json: %+v", r)
	}
	r = cruxprov(t, "--home", home, "verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: signer_untrusted: ") || !strings.Contains(r.stderr, "approval by alice (") ||
		!strings.Contains(r.stderr, "to fix: cruxprov install") {
		t.Fatalf("verify: %+v", r)
	}
}

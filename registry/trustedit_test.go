package registry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestTrustEditedNotBuiltOn: trust.json edited by hand — mallory's key
// added, the threshold lowered from 2 to 1 — with as many governance
// steps as the history records. Before, a proposal and mallory's
// approval alone accepted a pin (the history recorded it as accepted;
// only verify refused it), and key list and policy show listed mallory
// and threshold 1. Now every mutation that builds on the trust state
// replays it as verify does, and CheckedTrust (key list, policy show)
// refuses it: registry_corrupt, nothing accepted.
func TestTrustEditedNotBuiltOn(t *testing.T) {
	ctx := context.Background()
	for name, edit := range map[string]func(tr map[string]any, mallory map[string]any){
		"a key added":           func(tr, m map[string]any) { tr["keys"] = append(tr["keys"].([]any), m) },
		"the threshold lowered": func(tr, m map[string]any) { tr["policy"] = map[string]any{"threshold": 1} },
	} {
		t.Run(name, func(t *testing.T) {
			d, _, k, _ := govDir(t, 2, "alice", "bob")
			mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
			p := filepath.Join(d.Root(), "trust.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var tr, mk map[string]any
			km, _ := json.Marshal(mallory.Key)
			if err := json.Unmarshal(b, &tr); err != nil || json.Unmarshal(km, &mk) != nil {
				t.Fatal(err)
			}
			edit(tr, mk)
			out, _ := json.Marshal(tr)
			if err := os.WriteFile(p, out, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = registry.CheckedTrust(ctx, d)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			_, _, err = d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
			wantRefusal(t, err, refusal.RegistryCorrupt)
			_, err = d.TrustKey(ctx, mallory.Key, "t")
			wantRefusal(t, err, refusal.RegistryCorrupt)
			// Put back as written, propose; then edit again and approve.
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, out, 0o644); err != nil {
				t.Fatal(err)
			}
			signer := mallory.Priv
			if name == "the threshold lowered" {
				signer = k["alice"].Priv
			}
			res, err := d.Approve(ctx, cs.Metadata.ID, signer, nil)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			if res != nil {
				t.Errorf("approve: %+v", res)
			}
			if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
				t.Errorf("a pin was accepted: %v", err)
			}
		})
	}
}

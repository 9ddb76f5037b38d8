package registry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApproveSupersededAdvisesNoRegression: approving a provider's
// change-set that was accepted and superseded since (a later revision
// accepted, or the provider retired) is refused saying so, naming the
// revision and change-set the registry holds now, with no remedy. It
// advised the install built from that old change-set, which proposed
// regressing the accepted pin: walking operator.md, the pin at revision 3
// also ran a container image, and the advised install dropped it. A
// change-set rejected is still advised proposed again (its install).
func TestApproveSupersededAdvisesNoRegression(t *testing.T) {
	ctx := context.Background()
	eachRegistry(t, func(t *testing.T, reg registry.Registry) {
		alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
		if _, err := reg.TrustKey(ctx, alice.Key, "t"); err != nil {
			t.Fatal(err)
		}
		accept := func(c registry.Change) *registry.ChangeSet {
			t.Helper()
			cs, _, err := reg.Propose(ctx, c, "t")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := reg.Approve(ctx, cs.Metadata.ID, alice.Priv, nil); err != nil {
				t.Fatal(err)
			}
			return cs
		}
		v1 := accept(registrytest.Change("acme-echo", "1.0"))
		accept(registrytest.Change("acme-echo", "2.0"))
		v3 := accept(registrytest.Change("acme-echo", "3.0"))
		for _, key := range []registrytest.Key{alice, registrytest.NewKey(t, "bob", registry.RoleApprover)} {
			_, err := reg.Approve(ctx, v1.Metadata.ID, key.Priv, nil)
			if refusal.CodeOf(err) != refusal.ChangesetInvalid {
				t.Fatalf("%s approving the superseded change-set: %v, want changeset_invalid", key.Key.Name, err)
			}
			if r := refusal.RemedyOf(err); r != nil {
				t.Errorf("%s approving the superseded change-set: remedy %+v, want none (%v)", key.Key.Name, r, err)
			}
			want := fmt.Sprintf("change-set %s is approved, not proposed: it was superseded: acme-echo is at revision 3 now (change-set %s), which the registry holds; there is nothing to approve in this one", v1.Metadata.ID, v3.Metadata.ID)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s approving the superseded change-set: %q does not say %q", key.Key.Name, err, want)
			}
		}

		rejected, _, err := reg.Propose(ctx, registrytest.Change("acme-echo", "4.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Reject(ctx, rejected.Metadata.ID, "no", "t"); err != nil {
			t.Fatal(err)
		}
		_, err = reg.Approve(ctx, rejected.Metadata.ID, alice.Priv, nil)
		if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPropose || !strings.HasPrefix(r.Target, "acme-echo==4.0@sha256:") {
			t.Errorf("approving a rejected change-set: remedy %+v, want its install (%v)", r, err)
		}

		retire := accept(registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}})
		_, err = reg.Approve(ctx, v3.Metadata.ID, alice.Priv, nil)
		want := fmt.Sprintf("it was superseded: acme-echo was retired at revision 4 (change-set %s), as the registry holds now; there is nothing to approve in this one", retire.Metadata.ID)
		if refusal.CodeOf(err) != refusal.ChangesetInvalid || refusal.RemedyOf(err) != nil || !strings.Contains(err.Error(), want) {
			t.Errorf("approving a change-set superseded by a retirement: %v (remedy %+v), want %q and no remedy", err, refusal.RemedyOf(err), want)
		}
	})
}

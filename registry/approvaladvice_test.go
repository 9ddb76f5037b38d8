package registry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApprovalRefusalsSayWhatToDo: walking governance.md as
// cruxprov-rootless, four refusals named no way on (DESIGN §6: a refusal
// that advises names a command that works): an approval by a builder key
// ("builder signatures never count as approvals") or by a key the
// registry does not trust; a stale change-set ("propose again", not
// saying with what); and verify of a retired provider ("was retired at
// revision 3"). Each now names what to do, and the stale provider's and
// the retired one's carry the install remedy the CLI renders.
func TestApprovalRefusalsSayWhatToDo(t *testing.T) {
	ctx := context.Background()
	d, alice, _ := aliceRoot(t)
	ci := registrytest.NewKey(t, "ci", registry.RoleBuilder)
	mallory := registrytest.NewKey(t, "mallory", registry.RoleApprover)
	carol := registrytest.NewKey(t, "carol", registry.RoleApprover)
	var err error
	approve := func(id any, k registrytest.Key) error {
		t.Helper()
		var cs *registry.ChangeSet
		switch x := id.(type) {
		case *registry.ChangeSet:
			cs = x
		case registry.Change:
			if cs, _, err = d.Propose(ctx, x, "t"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := d.Approve(ctx, cs.Metadata.ID, k.Priv, nil)
		return err
	}
	says := func(what string, err error, code refusal.Code, want string) {
		t.Helper()
		if refusal.CodeOf(err) != code {
			t.Fatalf("%s: %v, want %s", what, err, code)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", what, err, want)
		}
	}
	tr, err := d.TrustKey(ctx, ci.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := approve(tr.ChangeSet, alice); err != nil {
		t.Fatal(err)
	}
	v1, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	// The words say what to do; the remedy (rendered by cmd/) lists the
	// keys with their roles.
	for _, c := range []struct {
		what string
		key  registrytest.Key
		want string
	}{{"approve by a builder key", ci, "approve with an approver key (the registry's trusted keys are listed with their roles)"},
		{"approve by an untrusted key", mallory, "approve with a trusted approver key (the registry's trusted keys are listed with their roles)"}} {
		err := approve(v1, c.key)
		says(c.what, err, refusal.SignerUntrusted, c.want)
		if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionListKeys {
			t.Errorf("%s: remedy %+v, want list_keys", c.what, r)
		}
	}

	// Two proposals on one base: the second, once the first is
	// approved, is stale, and says what proposes it again.
	v2, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	trustCarol, err := d.TrustKey(ctx, carol.Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	untrustCI, _, err := d.Propose(ctx, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "ci", Digest: ci.Key.Digest}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := approve(v1, alice); err != nil {
		t.Fatal(err)
	}
	err = approve(v2, alice)
	says("approve a stale provider change-set", err, refusal.ChangesetStale, "propose again (install it again, as it was proposed)")
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPropose || !strings.HasPrefix(r.Target, "acme-echo==2.0@sha256:") {
		t.Errorf("stale provider change-set: remedy %+v, want propose acme-echo==2.0@sha256:…", r)
	}
	if err := approve(trustCarol.ChangeSet, alice); err != nil {
		t.Fatal(err)
	}
	err = approve(untrustCI, alice)
	says("approve a stale trust change-set", err, refusal.ChangesetStale, "propose again (untrust ci again)")
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionUntrustKey || r.Target != "ci" {
		t.Errorf("stale trust change-set: remedy %+v, want untrust_key ci", r)
	}

	// Retired: verify says it runs again once proposed and approved.
	if err := approve(registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, alice); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	says("verify a retired provider", err, refusal.PinUnapproved, "runs again once proposed again and approved")
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPropose {
		t.Errorf("retired: remedy %+v, want propose", r)
	}

	// Retiring a provider with no accepted pin (a mistyped name) or one
	// retired already said "has no accepted pin to retire" and no more:
	// the change-sets' scopes name the providers there are.
	for what, name := range map[string]string{"retire an unknown provider": "acme-ecoh", "retire a retired provider": "acme-echo"} {
		_, _, err = d.Propose(ctx, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: name}}, "t")
		says(what, err, refusal.PinUnapproved, "nothing was proposed")
		if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionReviewChangesets {
			t.Errorf("%s: remedy %+v, want review_changesets", what, r)
		}
	}
}

package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestNeverAcceptedSaysWhatIsNext: the pin of a provider the registry
// never accepted is pin_unapproved advising what its change-sets say is
// next, in a Dir and a Stub alike: where none of it is proposed, the
// proposal (propose: the install), with the review of the change-sets
// after it only where some propose other providers (a mistyped name);
// where one is, its approval, naming it (the root of trust first where
// the registry trusts no key yet); where several are, their review. It advised reviewing the change-sets always ("a proposal takes
// effect once approved"), and an operator who verified a provider never
// proposed was sent to an empty list.
func TestNeverAcceptedSaysWhatIsNext(t *testing.T) {
	ctx := context.Background()
	eachRegistry(t, func(t *testing.T, reg registry.Registry) {
		check := func(what string, wantAction refusal.Action, wantTarget string, wantOr bool, words string) {
			t.Helper()
			for how, err := range map[string]error{
				"Pin":       func() error { _, err := reg.Pin(ctx, "acme-echo"); return err }(),
				"VerifyPin": func() error { _, err := registry.VerifyPin(ctx, reg, "", "acme-echo", time.Now()); return err }(),
			} {
				if refusal.CodeOf(err) != refusal.PinUnapproved {
					t.Fatalf("%s, %s: %v, want pin_unapproved", what, how, err)
				}
				r := refusal.RemedyOf(err)
				if r == nil || r.Action != wantAction || r.Target != wantTarget || (r.Or != nil) != wantOr ||
					(wantOr && r.Or.Action != refusal.ActionReviewChangesets) {
					t.Errorf("%s, %s: remedy %+v, want %s %q (or review_changesets: %v) (%v)", what, how, r, wantAction, wantTarget, wantOr, err)
				}
				if !strings.Contains(err.Error(), words) {
					t.Errorf("%s, %s: %q does not say %q", what, how, err, words)
				}
			}
		}
		check("nothing proposed", refusal.ActionPropose, "acme-echo", false, "provider acme-echo has no accepted pin, and no change-set of it is proposed: propose it")

		other, _, err := reg.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		check("another provider proposed", refusal.ActionPropose, "acme-echo", true, "if the name is mistyped, find it among the providers the change-sets propose")

		cs, _, err := reg.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		check("its change-set proposed, no key trusted", refusal.ActionTrustKey, registry.RoleApprover, false, "its change-set "+cs.Metadata.ID.String()+" is proposed, not yet approved, and the registry trusts no key yet: trust its root key first")
		key := registrytest.NewKey(t, "root", registry.RoleApprover)
		if _, err := reg.TrustKey(ctx, key.Key, "t"); err != nil {
			t.Fatal(err)
		}
		check("its change-set proposed", refusal.ActionApprove, cs.Metadata.ID.String(), false, "its change-set "+cs.Metadata.ID.String()+" is proposed, not yet approved")

		cs2, _, err := reg.Propose(ctx, registrytest.Change("acme-echo", "2.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		check("two proposed", refusal.ActionReviewChangesets, "", false, "2 change-sets of it are proposed, none approved yet (")
		if _, err := reg.Pin(ctx, "acme-echo"); !strings.Contains(err.Error(), cs.Metadata.ID.String()) || !strings.Contains(err.Error(), cs2.Metadata.ID.String()) {
			t.Errorf("two proposed: %q does not name both", err)
		}

		for _, c := range []*registry.ChangeSet{cs, cs2, other} {
			if _, err := reg.Reject(ctx, c.Metadata.ID, "no", "t"); err != nil {
				t.Fatal(err)
			}
		}
		check("all rejected", refusal.ActionPropose, "acme-echo", true, "no change-set of it is proposed: propose it")
	})
}

// TestNeverAcceptedReadsNoChangeSet: the advice of a provider never
// accepted comes from the history, not the change-set files: a Dir.Pin
// asked by `changeset list` for every provider proposed and never
// accepted loaded every change-set each time (130 ms with 300 of them,
// per provider). A change-set file it parsed would refuse it here.
func TestNeverAcceptedReadsNoChangeSet(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Root(), "changesets", cs.Metadata.ID.Hex()+".yaml"), []byte("not: [a change-set"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.Pin(ctx, "acme-echo")
	if r := refusal.RemedyOf(err); refusal.CodeOf(err) != refusal.PinUnapproved || r == nil || r.Action != refusal.ActionTrustKey {
		t.Errorf("Pin: %v (remedy %+v), want pin_unapproved advising the root of trust, then its approval", err, r)
	}
}

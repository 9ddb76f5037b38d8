package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestChangeSetStateEditedRefused: a change-set file's state is held to
// the history, as its proposedAt and approvals are. Walking
// governance.md as two operators at a threshold of 2: alice approved a
// change-set, bob rejected it, and its file edited back to `state:
// proposed` (one line) was accepted by carol's approval alone, alice's
// approval, which the rejection withdrew, counting again; the history
// then said proposed, approved, rejected, approved, accepted, and
// `registry log --verify` passed it. Now the rejected change-set edited
// back, and an open one edited to approved or rejected, are
// registry_corrupt to `changeset show`, `list` and the next approval,
// and nothing is accepted.
func TestChangeSetStateEditedRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		reject bool
		state  string
		want   string
	}{
		{"rejected, edited back to proposed", true, "proposed", "it says it is proposed; the history rejected it since its last proposal"},
		{"proposed, edited to approved", false, "approved", "it says it is approved; the history proposed it last"},
		{"proposed, edited to rejected", false, "rejected", "it says it is rejected; the history proposed it last"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _, k, approve := govDir(t, 2, "alice", "bob", "carol")
			cs := approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
			if c.reject {
				if _, err := d.Reject(ctx, cs.Metadata.ID, "bob says no", "bob"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := registry.CheckedChangeSets(ctx, d); err != nil {
				t.Fatalf("as written: %v", err)
			}
			p := filepath.Join(d.Root(), "changesets", cs.Metadata.ID.Hex()+".yaml")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "reason:") {
					kept = append(kept, l)
				}
			}
			if err := os.WriteFile(p, []byte(replaceValue(t, strings.Join(kept, "\n"), "state:", c.state)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = d.Approve(ctx, cs.Metadata.ID, k["carol"].Priv, nil)
			if refusal.CodeOf(err) != refusal.RegistryCorrupt {
				t.Errorf("carol's approval: %v, want registry_corrupt", err)
			}
			if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
				t.Errorf("a pin was accepted: %v", err)
			}
			_, err = registry.CheckedChangeSet(ctx, d, cs.Metadata.ID)
			wantRefusal(t, err, refusal.RegistryCorrupt)
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%q does not say %q", err, c.want)
			}
			_, err = registry.CheckedChangeSets(ctx, d)
			wantRefusal(t, err, refusal.RegistryCorrupt)
		})
	}
}

// TestChangeSetStateAsTheHistorySays: the states cruxprov writes are the
// history's: open, rejected, proposed again, and accepted (a provider's
// pin, a trust change) all read back through CheckedChangeSets.
func TestChangeSetStateAsTheHistorySays(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 2, "alice", "bob")
	cs := approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
	if _, err := d.Reject(ctx, cs.Metadata.ID, "no", "bob"); err != nil {
		t.Fatal(err)
	}
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"], k["bob"])
	approve(registrytest.Change("acme-other", "1.0"), nil, k["bob"])
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 1}}, nil, k["alice"], k["bob"])
	l, err := registry.CheckedChangeSets(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, cs := range l {
		got[cs.Scope()+" "+cs.Status.State]++
	}
	want := map[string]int{"acme-echo approved": 1, "acme-other proposed": 1, "@trust approved": 3}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d change-sets, want %d (%v)", k, got[k], n, got)
		}
	}
}

// TestHistoryApprovalAfterRejectionRefused: a history that approves a
// change-set after rejecting it, with no proposal between, is refused by
// VerifyHistory (registry log --verify): the trace a change-set file
// edited back to proposed and approved left before approvals held the
// file's state to the history (TestChangeSetStateEditedRefused), the
// rejection's withdrawn approvals counting again. Here the approval
// alice gave before bob's rejection is put back into the chain.
func TestHistoryApprovalAfterRejectionRefused(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 2, "alice", "bob", "carol")
	cs := approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
	if _, err := d.Reject(ctx, cs.Metadata.ID, "bob says no", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatalf("as written: %v", err)
	}
	log, err := d.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var alice *registry.Entry
	for i := range log {
		if log[i].Event == registry.EventChangeSetApproved && log[i].Digest == cs.Metadata.ID {
			alice = &log[i]
		}
	}
	if alice == nil {
		t.Fatal("no approval in the history")
	}
	appendEntryAt(t, filepath.Join(d.Root(), "log.jsonl"), *alice)
	err = registry.VerifyHistory(ctx, d)
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if !strings.Contains(err.Error(), "after rejecting it") {
		t.Errorf("%q does not say the approval came after the rejection", err)
	}

	// Rejected, proposed again and approved: a history as cruxprov
	// writes it passes.
	d, _, k, approve = govDir(t, 2, "alice", "bob")
	cs = approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
	if _, err := d.Reject(ctx, cs.Metadata.ID, "no", "bob"); err != nil {
		t.Fatal(err)
	}
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"], k["bob"])
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Errorf("rejected, proposed again, approved: %v", err)
	}
}

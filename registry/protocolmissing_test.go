package registry_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/sign"
)

// registryFiles is every file under root, by its path, with its bytes.
func registryFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles fails t where the files under root are not before's.
func sameFiles(t *testing.T, what, root string, before map[string][]byte) {
	t.Helper()
	after := registryFiles(t, root)
	for p, b := range after {
		if old, ok := before[p]; !ok {
			t.Errorf("%s: %s was written", what, p)
		} else if !bytes.Equal(old, b) {
			t.Errorf("%s: %s changed", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s: %s was removed", what, p)
		}
	}
}

// withoutProtocol is a register (or, with update, an update) change of
// acme-echo at v that names no protocol range.
func withoutProtocol(v string, update bool) registry.Change {
	c := registrytest.Change("acme-echo", v)
	c.Provider.Protocol = nil
	if update {
		c.Action = registry.ActionUpdate
	}
	return c
}

// missingProtocol fails t unless err is changeset_invalid saying, in one
// line, that provider acme-echo's protocol is missing and what to add.
func missingProtocol(t *testing.T, what string, err error) {
	t.Helper()
	if refusal.CodeOf(err) != refusal.ChangesetInvalid {
		t.Fatalf("%s: %v, want changeset_invalid", what, err)
	}
	msg := err.Error()
	for _, want := range []string{"provider acme-echo", "protocol is missing", "add protocol: [1, 1]", "propose again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: %q is more than one line", what, msg)
	}
}

// TestProposeWithoutProtocolRefused: a register or an update change that
// names no protocol range is refused changeset_invalid when it is
// proposed, in Dir and Stub alike, and nothing is recorded: no
// change-set file, no history event. It was accepted (validateChangeShape
// lets a stored change-set leave protocol out), approved, and only its
// pin refused at verify, protocol_unsupported (DESIGN §8 and §9 make the
// range part of what a registration holds; install always records it).
func TestProposeWithoutProtocolRefused(t *testing.T) {
	ctx := context.Background()
	for _, update := range []bool{false, true} {
		what := map[bool]string{false: "register", true: "update"}[update]
		t.Run("dir "+what, func(t *testing.T) {
			d, _ := clockedDir(t)
			alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
			if _, err := d.TrustKey(ctx, alice.Key, "t"); err != nil {
				t.Fatal(err)
			}
			if update {
				registrytest.Accept(t, d, registrytest.Change("acme-echo", "1.0.0"), alice)
			}
			log, err := d.Log(ctx)
			if err != nil {
				t.Fatal(err)
			}
			l, err := d.ChangeSets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before := registryFiles(t, d.Root())
			_, _, err = d.Propose(ctx, withoutProtocol("1.0.1", update), "t")
			missingProtocol(t, what, err)
			sameFiles(t, what+" refused", d.Root(), before)
			// A registry opened afresh holds no trace of it.
			d, err = registry.OpenDir(ctx, d.Root())
			if err != nil {
				t.Fatal(err)
			}
			if again, err := d.Log(ctx); err != nil || len(again) != len(log) {
				t.Errorf("the history went from %d to %d events on a refused proposal (%v)", len(log), len(again), err)
			}
			if again, err := d.ChangeSets(ctx); err != nil || len(again) != len(l) {
				t.Errorf("change-sets went from %d to %d on a refused proposal (%v)", len(l), len(again), err)
			}
		})
		t.Run("stub "+what, func(t *testing.T) {
			r := registry.NewStub()
			alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
			if _, err := r.TrustKey(ctx, alice.Key, "t"); err != nil {
				t.Fatal(err)
			}
			if update {
				cs, _, err := r.Propose(ctx, registrytest.Change("acme-echo", "1.0.0"), "t")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Approve(ctx, cs.Metadata.ID, alice.Priv, nil); err != nil {
					t.Fatal(err)
				}
			}
			log, _ := r.Log(ctx)
			l, _ := r.ChangeSets(ctx)
			_, _, err := r.Propose(ctx, withoutProtocol("1.0.1", update), "t")
			missingProtocol(t, what, err)
			if again, _ := r.ChangeSets(ctx); len(again) != len(l) {
				t.Errorf("change-sets went from %d to %d on a refused proposal", len(l), len(again))
			}
			if again, _ := r.Log(ctx); len(again) != len(log) {
				t.Errorf("the history went from %d to %d events on a refused proposal", len(log), len(again))
			}
		})
	}
}

// The registry of testdata/protocol-less was written by cruxprov be00320
// (2026-12-07), before a proposal had to name a protocol range: alice
// trusted as the root of trust, acme-echo 1.0.0 registered with no
// protocol and approved by her (revision 1), then an update to 1.0.1,
// with no protocol either, proposed and left open. alice.key beside it
// is her key pair's private half (a test key, its password "alice").
const (
	protocolLessPin      = "sha256:2b402f2627b118450d8343aeb37fb5a5938ea1e4041403a24a99b4415fac8ab8" // acme-echo 1.0.0, revision 1
	protocolLessProposal = "sha256:f073f4514cc710faa550406ec8efdd3d4f7ba8be58bd2401e76c5f909aaf6776" // acme-echo 1.0.1, open
)

// TestProtocolLessRegistryStillOpens: a registry an older cruxprov wrote,
// holding a pin and an open proposal without protocol, still opens, lists
// both, audits, and repairs a lost pin file from its change-set: the
// protocol range is required of a new proposal, not of what is stored
// (verify refuses such a pin protocol_unsupported). Proposing that same
// change again is refused as any proposal without protocol is: it was
// found open and returned as proposed already.
func TestProtocolLessRegistryStillOpens(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "registry")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "protocol-less", "registry"))); err != nil {
		t.Fatal(err)
	}
	d, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatalf("a registry with proposals without protocol: %v", err)
	}
	l, err := registry.CheckedChangeSets(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, cs := range l {
		if len(cs.Spec.Changes) == 1 && cs.Spec.Changes[0].Provider != nil && len(cs.Spec.Changes[0].Provider.Protocol) != 0 {
			t.Errorf("change-set %s names a protocol range: not the registry this test means", cs.Metadata.ID)
		}
		states[cs.Metadata.ID.String()] = cs.Status.State
	}
	if len(states) != 2 || states[protocolLessPin] != registry.StateApproved || states[protocolLessProposal] != registry.StateProposed {
		t.Fatalf("change-sets %v: want %s approved and %s proposed", states, protocolLessPin, protocolLessProposal)
	}
	if p, err := d.Pin(ctx, "acme-echo"); err != nil || p == nil || p.Revision != 1 {
		t.Fatalf("the pin without protocol: %+v, %v", p, err)
	}
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatalf("the history: %v", err)
	}
	pinFile := filepath.Join(root, "pins", "acme-echo.json")
	want, err := os.ReadFile(pinFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pinFile); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Repair(ctx); err != nil {
		t.Fatalf("repair of a lost pin without protocol: %v", err)
	}
	if got, err := os.ReadFile(pinFile); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the pin file repaired is not the one lost (%v)", err)
	}

	before := registryFiles(t, root)
	cs, already, err := d.Propose(ctx, withoutProtocol("1.0.1", true), "alice")
	if err == nil {
		t.Fatalf("the open proposal without protocol proposed again: %s (already %v), want changeset_invalid", cs.Metadata.ID, already)
	}
	missingProtocol(t, "the stored proposal proposed again", err)
	sameFiles(t, "proposed again, refused", root, before)
	// With its range, it is a new proposal, and the old one stays listed.
	with := withoutProtocol("1.0.1", true)
	with.Provider.Protocol = []int{1, 1}
	cs, already, err = d.Propose(ctx, with, "alice")
	if err != nil || already || cs.Metadata.ID.String() == protocolLessProposal {
		t.Fatalf("the update with its protocol range: %v (already %v)", err, already)
	}
	if _, err := d.ChangeSet(ctx, mustDigest(t, protocolLessProposal)); err != nil {
		t.Fatalf("the old proposal after a new one: %v", err)
	}
}

// TestApproveProtocolLessProposalRefused: the open proposal an older
// cruxprov stored without a protocol range cannot be approved: accepted,
// its pin would be refused protocol_unsupported by every verify. The
// refusal (changeset_invalid, asked before the key's password too:
// Approvable) advises installing the provider again, which proposes it
// with its range, and nothing is recorded. It was approved.
func TestApproveProtocolLessProposalRefused(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "registry")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "protocol-less", "registry"))); err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join("testdata", "protocol-less", "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := sign.LoadPrivateKey(pemBytes, []byte("alice"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	id := mustDigest(t, protocolLessProposal)
	// The lock file, empty, is made by the first change: not a trace.
	if err := os.WriteFile(filepath.Join(root, ".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := registryFiles(t, root)
	check := func(what string, err error) {
		t.Helper()
		var r *refusal.Error
		if !errors.As(err, &r) || r.Code != refusal.ChangesetInvalid {
			t.Fatalf("%s: %v, want changeset_invalid", what, err)
		}
		msg := err.Error()
		for _, want := range []string{protocolLessProposal, "acme-echo", "no protocol range", "protocol_unsupported"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", what, msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: %q is more than one line", what, msg)
		}
		if r.Remedy == nil || r.Remedy.Action != refusal.ActionPropose || !strings.HasPrefix(r.Remedy.Target, "acme-echo==1.0.1@sha256:") {
			t.Errorf("%s: remedy %+v, want propose acme-echo==1.0.1", what, r.Remedy)
		}
	}
	check("Approvable", d.Approvable(ctx, id))
	res, err := d.Approve(ctx, id, alice, nil)
	if err == nil {
		t.Fatalf("the proposal without protocol approved: %+v", res)
	}
	check("Approve", err)
	sameFiles(t, "approval refused", root, before)
	if p, err := d.Pin(ctx, "acme-echo"); err != nil || p.Revision != 1 {
		t.Fatalf("the pin after a refused approval: %+v, %v", p, err)
	}
}

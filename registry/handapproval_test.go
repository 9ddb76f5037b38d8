package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApprovalAddedByHandRefused: with a threshold of 2, an approval put
// into a change-set file by hand — one replayed from another change-set
// (its signature does not verify), the same approval again under another
// name, a withdrawn approval put back after a rejection — is refused
// registry_corrupt by the next approval, which accepts nothing. Before,
// the next approval accepted the change-set (counting only what
// verified), and carried the hand-made approval into the trust state or
// the pin as an approval given; and the withdrawn one counted again.
func TestApprovalAddedByHandRefused(t *testing.T) {
	ctx := context.Background()
	d, _, k, _ := govDir(t, 2, "alice", "bob", "carol")
	a, b, c := k["alice"], k["bob"], k["carol"]
	csPath := func(id digest.Digest) string { return filepath.Join(d.Root(), "changesets", id.Hex()+".yaml") }
	// Alice approves acme-echo; her approval is copied into acme-other.
	one, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, one.Metadata.ID, a.Priv, nil); err != nil {
		t.Fatal(err)
	}
	withAlice, err := d.ChangeSet(ctx, one.Metadata.ID)
	if err != nil {
		t.Fatal(err)
	}
	put := func(id digest.Digest, aps []registry.Approval) {
		t.Helper()
		cs, err := d.ChangeSet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		cs.Status.Approvals = aps
		y, err := registry.MarshalChangeSet(cs)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(csPath(id), y, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, id digest.Digest, want string) {
		t.Helper()
		_, err := d.Approve(ctx, id, c.Priv, nil)
		if refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: approve = %v, want registry_corrupt saying %q", what, err, want)
		}
		if p, _ := d.Pin(ctx, "acme-other"); p != nil {
			t.Errorf("%s: a pin was accepted", what)
		}
	}
	other, _, err := d.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	put(other.Metadata.ID, withAlice.Status.Approvals)
	refused("replayed", other.Metadata.ID, "never recorded")

	// Bob approves acme-other; his approval is copied under another name.
	put(other.Metadata.ID, nil)
	if _, err := d.Approve(ctx, other.Metadata.ID, b.Priv, nil); err != nil {
		t.Fatal(err)
	}
	cs, _ := d.ChangeSet(ctx, other.Metadata.ID)
	dup := cs.Status.Approvals[0]
	dup.Name = "bob2"
	put(other.Metadata.ID, append(cs.Status.Approvals, dup))
	refused("duplicate", other.Metadata.ID, "two approvals")

	// Rejected, proposed again: bob's withdrawn approval put back.
	put(other.Metadata.ID, cs.Status.Approvals)
	if _, err := d.Reject(ctx, other.Metadata.ID, "no", "t"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Propose(ctx, registrytest.Change("acme-other", "1.0"), "t"); err != nil {
		t.Fatal(err)
	}
	put(other.Metadata.ID, cs.Status.Approvals)
	refused("withdrawn", other.Metadata.ID, "never recorded")

	// The file as the registry wrote it: bob and carol accept it.
	put(other.Metadata.ID, nil)
	for _, k := range []registrytest.Key{b, c} {
		if _, err := d.Approve(ctx, other.Metadata.ID, k.Priv, nil); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := d.Pin(ctx, "acme-other"); err != nil || len(p.Approvals) != 2 {
		t.Errorf("pin after two recorded approvals: %v", err)
	}
}

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestChangesetDiffStaleRevisions: the diff of a trust change made stale
// by another (bob's and carol's trust both proposed on revision 0, bob's
// approved) says the revisions it was proposed at and where the trust
// state is now, not "revision 1 → 1".
func TestChangesetDiffStaleRevisions(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, alice.Key, "t"); err != nil {
		t.Fatal(err)
	}
	bob, err := d.TrustKey(ctx, registrytest.NewKey(t, "bob", registry.RoleApprover).Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	carol, err := d.TrustKey(ctx, registrytest.NewKey(t, "carol", registry.RoleApprover).Key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, bob.ChangeSet.Metadata.ID, alice.Priv, nil); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "--home", home, "changeset", "diff", carol.ChangeSet.Metadata.ID.String())
	if r.code != 0 || !strings.Contains(r.stdout, "STALE") || strings.Contains(r.stdout, "revision 1 → 1") ||
		!strings.Contains(r.stdout, "trust-key @trust, revision 0 → 1 as proposed; @trust is at revision 1 now") {
		t.Fatalf("changeset diff of a stale trust change: %+v", r)
	}
}

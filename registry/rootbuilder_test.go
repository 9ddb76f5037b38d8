package registry_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestFirstKeyBuilderSaysWhatToDo: a builder key trusted first on a
// registry that trusts none (a CI's key, ci.md) is changeset_invalid
// saying to trust an approver's key first, with the trust_key remedy for
// an approver the CLI renders; it said only "the first key trusted is the
// root of trust and must be an approver" (found walking ci.md as
// cruxprov-rootless). Nothing is trusted by it.
func TestFirstKeyBuilderSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	ci := registrytest.NewKey(t, "ci", registry.RoleBuilder)
	_, err = d.TrustKey(ctx, ci.Key, "t")
	if refusal.CodeOf(err) != refusal.ChangesetInvalid || !strings.Contains(err.Error(), "trust an approver's key first") {
		t.Fatalf("%v", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionTrustKey || r.Target != registry.RoleApprover {
		t.Errorf("remedy %+v", r)
	}
	alice := registrytest.NewKey(t, "alice", registry.RoleApprover)
	if tr, err := d.TrustKey(ctx, alice.Key, "t"); err != nil || !tr.Root {
		t.Fatalf("the approver after it: %+v, %v", tr, err)
	}
}

package registry_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestNoChangeSetAdvisesList: a change-set id the registry does not hold
// (mistyped, or from another registry) is changeset_invalid advising to
// list the change-sets (remedy review_changesets: cruxprov changeset
// list), for show and approve, in a Dir and a Stub. Before, it said "no
// change-set sha256:…" with no next step.
func TestNoChangeSetAdvisesList(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	missing := digest.Sum([]byte("no such change-set"))
	for name, reg := range map[string]registry.Registry{"dir": d, "stub": registry.NewStub()} {
		key := registrytest.NewKey(t, "root", registry.RoleApprover)
		if _, err := reg.TrustKey(ctx, key.Key, "t"); err != nil {
			t.Fatal(err)
		}
		_, err1 := reg.ChangeSet(ctx, missing)
		_, err2 := reg.Approve(ctx, missing, key.Priv, nil)
		for what, err := range map[string]error{"show": err1, "approve": err2} {
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.ChangesetInvalid || r.Remedy == nil || r.Remedy.Action != refusal.ActionReviewChangesets {
				t.Errorf("%s %s: %v (remedy %+v), want changeset_invalid advising review_changesets", name, what, err, remedyOf(err))
			}
		}
	}
}

func remedyOf(err error) *refusal.Remedy {
	var r *refusal.Error
	if errors.As(err, &r) {
		return r.Remedy
	}
	return nil
}

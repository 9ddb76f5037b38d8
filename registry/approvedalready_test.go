package registry_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestApprovedAlready: what Approve by a key whose approval stands says
// (Already), read with the key's digest alone, before its password: the
// same result, for the key that accepted the change-set the registry
// holds; nil where Approve would sign (a proposal by a trusted key, an
// approval expired, which a renewal signs again); the refusals
// Approvable gives, and Approve's of this key (not trusted, not an
// approver of the accepted change-set), otherwise. Dir and Stub alike.
func TestApprovedAlready(t *testing.T) {
	ctx := context.Background()
	type reg interface {
		registry.Registry
		Approvable(context.Context, digest.Digest) error
		ApprovedAlready(context.Context, digest.Digest, digest.Digest) (*registry.ApproveResult, error)
	}
	clock := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	now := func() time.Time { return clock }
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	d.Now = now
	s := registry.NewStub()
	s.Now = now
	for name, r := range map[string]reg{"dir": d, "stub": s} {
		t.Run(name, func(t *testing.T) {
			clock = time.Now().Add(-2 * time.Hour).Truncate(time.Second)
			a := registrytest.NewKey(t, "a", registry.RoleApprover)
			b := registrytest.NewKey(t, "b", registry.RoleApprover)
			if _, err := r.TrustKey(ctx, a.Key, "t"); err != nil {
				t.Fatal(err)
			}
			cs, _, err := r.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
			if err != nil {
				t.Fatal(err)
			}
			id, ad := cs.Metadata.ID, a.Priv.Public().Digest()
			if res, err := r.ApprovedAlready(ctx, id, ad); res != nil || err != nil {
				t.Fatalf("a proposal: %+v %v", res, err)
			}
			if res, err := r.ApprovedAlready(ctx, id, b.Priv.Public().Digest()); res != nil || refusal.CodeOf(err) != refusal.SignerUntrusted {
				t.Errorf("a proposal, by a key the registry does not trust: %+v %v, want signer_untrusted", res, err)
			}
			exp := clock.Add(time.Hour)
			if _, err := r.Approve(ctx, id, a.Priv, &exp); err != nil {
				t.Fatal(err)
			}
			got, err := r.ApprovedAlready(ctx, id, ad)
			if err != nil || got == nil || !got.Already {
				t.Fatalf("approved by a: %+v %v", got, err)
			}
			want, err := r.Approve(ctx, id, a.Priv, nil)
			if err != nil || !want.Already {
				t.Fatalf("approve again: %+v %v", want, err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("ApprovedAlready says\n%s\nApprove says\n%s", gj, wj)
			}
			// A key that did not approve it is refused as Approve refuses
			// it, before its password (it was nil: the password was asked
			// for, then the approval refused).
			_, werr := r.Approve(ctx, id, b.Priv, nil)
			if res, err := r.ApprovedAlready(ctx, id, b.Priv.Public().Digest()); res != nil || werr == nil || refusal.CodeOf(err) != refusal.CodeOf(werr) {
				t.Errorf("a key that did not approve it: %+v %v, want Approve's refusal %v", res, err, werr)
			}
			clock = clock.Add(90 * time.Minute) // a's approval expired
			if res, err := r.ApprovedAlready(ctx, id, ad); res != nil || err != nil {
				t.Errorf("an approval expired (a renewal signs): %+v %v", res, err)
			}
			if _, err := r.ApprovedAlready(ctx, digest.Sum([]byte("none")), ad); refusal.CodeOf(err) != refusal.ChangesetInvalid {
				t.Errorf("an unknown change-set: %v", err)
			}
		})
	}
}

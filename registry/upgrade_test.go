package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
)

// The registry of testdata/approvals-v1 was written by cruxprov 38d2118
// (2026-12-01), before an approval named its registry: the demo's steps
// (two interfaces registered, acme-echo installed, alice trusted as the
// root of trust and approving it), then bob trusted by a change-set
// alice approved. Every approval in it is in the v1 form. alice.key is
// alice's key, password "demo-password".
const (
	v1Pin  = "sha256:9f9397424138d1540064e8764b88bcd3377be1396a0ac4468e3ba8fe75e3c359" // acme-echo, revision 1
	v1Step = "sha256:d1ba202edfa06a62d3ee2f1d13c0fdb7508ac616740e486109f3a5f176813660" // trust bob, governance step 1
)

// TestV1ApprovalsApprovedAgain: a registry an older cruxprov approved
// (approvals in the v1 form, which never count) is refused saying which
// change-set to approve again, and approving it again with the key that
// approved it replaces the approval — a governance step first, then the
// pin — after which the pin verifies and the history audits. Before, a
// trust step in the v1 form was refused "restore trust.json from a copy
// of the registry" (every copy holds the same approvals), which also
// stopped every change, the approval advised included; and a pin's
// approval, approved again, was "approved already … nothing changed".
func TestV1ApprovalsApprovedAgain(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "registry")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "approvals-v1", "registry"))); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join("testdata", "approvals-v1", "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := sign.LoadPrivateKey(pem, []byte("demo-password"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// advises says err is signature_invalid, says "v1 form", and has
	// the remedy approving change-set id again.
	advises := func(what string, err error, id string) {
		t.Helper()
		rem := refusal.RemedyOf(err)
		if !errors.Is(err, refusal.SignatureInvalid) || !strings.Contains(err.Error(), "v1 form") || strings.Contains(err.Error(), "restore") ||
			rem == nil || rem.Action != refusal.ActionRenewApproval || rem.Target != id {
			t.Fatalf("%s: %v (remedy %+v), want signature_invalid advising to approve %s again", what, err, rem, id)
		}
	}
	_, err = registry.VerifyPin(ctx, d, "", "acme-echo", now)
	advises("verify", err, v1Step)
	advises("the trust state", registry.VerifyTrust(ctx, d), v1Step)
	// The pin's approval cannot be replaced before the trust state
	// replays: the step comes first.
	_, err = d.Approve(ctx, mustDigest(t, v1Pin), alice, nil)
	advises("the pin approved before the step", err, v1Step)

	res, err := d.Approve(ctx, mustDigest(t, v1Step), alice, nil)
	if err != nil || !res.Renewed || !res.V1Form || !res.Accepted || res.Approvals != 1 {
		t.Fatalf("the step approved again: %+v, %v", res, err)
	}
	_, err = registry.VerifyPin(ctx, d, "", "acme-echo", now)
	advises("verify after the step", err, v1Pin)

	res, err = d.Approve(ctx, mustDigest(t, v1Pin), alice, nil)
	if err != nil || !res.Renewed || !res.V1Form || !res.Accepted || res.Pin == nil || res.Pin.Revision != 1 {
		t.Fatalf("the pin approved again: %+v, %v", res, err)
	}
	// As another process reads it: a registry opened afresh.
	d, err = registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := registry.VerifyPin(ctx, d, "", "acme-echo", now); err != nil || p.Revision != 1 {
		t.Fatalf("verify after both: %v", err)
	}
	if err := registry.VerifyTrust(ctx, d); err != nil {
		t.Fatalf("the trust state after both: %v", err)
	}
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatalf("the history after both: %v", err)
	}
	// And again: this key's approval stands now.
	if res, err := d.Approve(ctx, mustDigest(t, v1Step), alice, nil); err != nil || !res.Already || res.Renewed {
		t.Fatalf("the step approved a third time: %+v, %v", res, err)
	}
	if res, err := d.Approve(ctx, mustDigest(t, v1Pin), alice, nil); err != nil || !res.Already || res.Renewed {
		t.Fatalf("the pin approved a third time: %+v, %v", res, err)
	}
}

func mustDigest(t *testing.T, s string) digest.Digest {
	t.Helper()
	d, err := digest.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestV1TrustLostRepaired: trust.json lost in a registry an older
// cruxprov approved. RepairWith refused to make it again (its steps'
// approvals are in the v1 form) while the approval that replaces one
// was refused for the trust.json lost. It now writes back the document
// that was lost, byte for byte (the v1 approvals checked over that form),
// and reports the step to approve again; approving it works.
func TestV1TrustLostRepaired(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "registry")
	if err := os.CopyFS(root, os.DirFS(filepath.Join("testdata", "approvals-v1", "registry"))); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(root, "trust.json")
	want, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tf); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join("testdata", "approvals-v1", "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := sign.LoadPrivateKey(pem, []byte("demo-password"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.RepairWith(ctx, registry.RepairOptions{RootKey: alice.Public().PEM()})
	if err != nil || !res.Trust {
		t.Fatalf("RepairWith the root key: %+v, %v", res, err)
	}
	if rem := refusal.RemedyOf(res.ApproveAgain); !errors.Is(res.ApproveAgain, refusal.SignatureInvalid) || rem == nil || rem.Action != refusal.ActionRenewApproval || rem.Target != v1Step {
		t.Errorf("the repair's next step: %v (remedy %+v); want the step %s approved again", res.ApproveAgain, rem, v1Step)
	}
	if got, err := os.ReadFile(tf); err != nil || string(got) != string(want) {
		t.Errorf("trust.json made again differs: %v\n got %s\nwant %s", err, got, want)
	}
	if res, err := d.Approve(ctx, mustDigest(t, v1Step), alice, nil); err != nil || !res.Renewed || !res.V1Form {
		t.Fatalf("the step approved again after the repair: %+v, %v", res, err)
	}
	if res, err := d.Repair(ctx); err != nil || res.Trust || res.ApproveAgain != nil {
		t.Errorf("Repair after the step: %+v, %v; want nothing to do", res, err)
	}
}

package registry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestVerifyPinApproverUntrusted: a pin approved by alice and bob at
// threshold 2, then alice untrusted (a key rotation approved by bob and
// carol), is not runnable until approved again: signer_untrusted naming
// alice as the history does, with the remedy to propose it again, and
// NotRunnable (so `registry log --verify` lists it and holds). Before,
// the refusal named only the key's digest and failed the whole audit.
func TestVerifyPinApproverUntrusted(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t, 2, "alice", "bob", "carol")
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"], k["bob"])
	if _, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock); err != nil {
		t.Fatal(err)
	}
	approve(registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "alice"}}, nil, k["bob"], k["carol"])
	_, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock)
	wantRefusal(t, err, refusal.SignerUntrusted)
	if !registry.NotRunnable(err) {
		t.Errorf("an approver untrusted since is a state, not a break: %v", err)
	}
	if !strings.Contains(err.Error(), "approval by alice (") || !strings.Contains(err.Error(), "propose the provider again") {
		t.Errorf("the refusal does not name alice or say what to do: %v", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionPropose || !strings.HasPrefix(rem.Target, "acme-echo==1.0@sha256:") {
		t.Errorf("remedy %+v, want %s acme-echo==1.0@sha256:…", rem, refusal.ActionPropose)
	}
}

// TestVerifyPinBelowRaisedThreshold: a pin approved by one key, then the
// threshold raised to 2, is pin_unapproved with the remedy to propose its
// package again (the install to run); it advised the change-set list,
// where nothing was open and the pin's own change-set takes no second
// approval.
func TestVerifyPinBelowRaisedThreshold(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t, 1, "alice", "bob", "carol")
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"])
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, k["alice"])
	_, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock)
	wantRefusal(t, err, refusal.PinUnapproved)
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionPropose || !strings.HasPrefix(rem.Target, "acme-echo==1.0@sha256:") {
		t.Errorf("remedy %+v, want %s acme-echo==1.0@sha256:…", rem, refusal.ActionPropose)
	}
}

// TestProposeRemedyNamesThePinnedImages: the install a pin_unapproved (or
// signer_untrusted) pin advises proposes the pin again, images included.
// A pin with a container image advised the install without --image
// (seen following docs/operator.md §8 as cruxprov-rootless): its
// change-set, approved, dropped the image, and with it every container run.
func TestProposeRemedyNamesThePinnedImages(t *testing.T) {
	ctx := context.Background()
	d, clock, k, approve := govDir(t, 1, "alice", "bob")
	c := registrytest.Change("acme-echo", "1.0")
	c.Provider.Materializations[0].Interpreter = registry.InterpreterLabel("/usr/bin/python3.12", "3.12.1", digest.FromBytes(make([]byte, 32)))
	m := c.Provider.Materializations[0]
	img := "registry.example/acme/echo@" + m.Digest.String()
	c.Provider.Materializations = append(c.Provider.Materializations, registry.Materialization{
		Backend: registry.BackendContainer, Platform: m.Platform, Digest: m.Digest, Image: img, Resolution: m.Resolution})
	approve(c, nil, k["alice"])
	approve(registry.Change{Action: registry.ActionSetPolicy, Policy: &registry.Policy{Threshold: 2}}, nil, k["alice"])
	_, err := registry.VerifyPin(ctx, d, "", "acme-echo", *clock)
	wantRefusal(t, err, refusal.PinUnapproved)
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionPropose || len(rem.Images) != 1 || rem.Images[0] != img {
		t.Errorf("remedy %+v, want %s naming the image %s", rem, refusal.ActionPropose, img)
	}
	// Its platforms and its env's interpreter too (the install's
	// --platform, which an image's must be among, and --python): a pin
	// with an image advised --platform PLATFORM --python PYTHON.
	if rem := refusal.RemedyOf(err); rem == nil || len(rem.Platforms) != 1 || rem.Platforms[0] != m.Platform || rem.Python != "/usr/bin/python3.12" {
		t.Errorf("remedy %+v, want the platform %s and the interpreter /usr/bin/python3.12", rem, m.Platform)
	}
}

// TestNotProposedAdviceNamesImagePlatforms: approving a provider's
// change-set that was rejected advises the install that proposes it
// again with its images and the platforms it names (a pin of images and
// no env: no interpreter); it advised --platform PLATFORM --python
// PYTHON, though the change-set knew its platforms.
func TestNotProposedAdviceNamesImagePlatforms(t *testing.T) {
	ctx := context.Background()
	d, _, k, _ := govDir(t, 1, "alice")
	c := registrytest.Change("acme-echo", "1.0")
	m := c.Provider.Materializations[0]
	img := "registry.example/acme/echo@" + m.Digest.String()
	c.Provider.Materializations = []registry.Materialization{
		{Backend: registry.BackendResolution, Platform: m.Platform, Digest: m.Resolution, Resolution: m.Resolution},
		{Backend: registry.BackendContainer, Platform: m.Platform, Digest: m.Digest, Image: img, Resolution: m.Resolution},
	}
	cs, _, err := d.Propose(ctx, c, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reject(ctx, cs.Metadata.ID, "not now", "t"); err != nil {
		t.Fatal(err)
	}
	_, err = d.Approve(ctx, cs.Metadata.ID, k["alice"].Priv, nil)
	wantRefusal(t, err, refusal.ChangesetInvalid)
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionPropose || len(rem.Images) != 1 || rem.Images[0] != img ||
		len(rem.Platforms) != 1 || rem.Platforms[0] != m.Platform || rem.Python != "" {
		t.Errorf("remedy %+v, want %s naming the image %s and the platform %s, no interpreter", rem, refusal.ActionPropose, img, m.Platform)
	}
}

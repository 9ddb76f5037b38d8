package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestRetiredAdviceProposesTheRetiredPin: verify of a retired provider
// advised proposing "acme-echo" (rendered as an install of WHEEL with
// placeholders for its platforms and interpreter): the retirement's spec
// names the provider alone. Its remedy now proposes again the pin the
// retirement replaced, from that pin's change-set (the retirement's
// spec base): its package, platforms, interpreter, images and bytecode;
// the detail says when it was retired and what is proposed again. With
// that change-set gone from the registry, the remedy names the provider
// and the detail says what the operator names instead.
func TestRetiredAdviceProposesTheRetiredPin(t *testing.T) {
	ctx := context.Background()
	d, alice, _ := aliceRoot(t)
	c := registrytest.Change("acme-echo", "1.0")
	img := "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32)
	c.Provider.Materializations[0].Interpreter = registry.InterpreterLabel("/usr/bin/python3.11", "3.11.2", digest.Sum([]byte("python3.11")))
	m := &c.Provider.Materializations[0]
	pkg := c.Provider.Package
	d0, err := digest.LocalMaterializationDigest(m.Platform, digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.2"}, m.Resolution, &digest.Root{Name: pkg.Name, Version: pkg.Version, SHA256: pkg.SHA256}, "")
	if err != nil {
		t.Fatal(err)
	}
	m.Digest = d0 // an env made without bytecode
	c.Provider.Materializations = append(c.Provider.Materializations,
		registry.Materialization{Backend: registry.BackendContainer, Platform: "linux_aarch64-cp312", Digest: c.Provider.Materializations[0].Digest, Image: img})
	accepted := registrytest.Accept(t, d, c, alice)
	retire := registrytest.Accept(t, d, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, alice)

	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	if refusal.CodeOf(err) != refusal.PinUnapproved {
		t.Fatalf("verify of a retired provider: %v, want pin_unapproved", err)
	}
	for _, want := range []string{"was retired at revision 2 (", "the advice proposes again the pin it retired (revision 1, acme-echo 1.0, change-set " + accepted.Metadata.ID.String() + ")"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	r := refusal.RemedyOf(err)
	wantTarget := "acme-echo==1.0@" + c.Provider.Package.SHA256.String()
	if r == nil || r.Action != refusal.ActionPropose || r.Target != wantTarget || !slices.Equal(r.Images, []string{img}) ||
		!slices.Equal(r.Platforms, []string{"linux_x86_64-cp312", "linux_aarch64-cp312"}) || r.Python != "/usr/bin/python3.11" || !r.NoBytecode {
		t.Fatalf("retired: remedy %+v, want the retired pin's: propose %s, its images, platforms, interpreter and no bytecode", r, wantTarget)
	}

	// The retired pin's change-set gone: nothing to propose again from.
	if err := os.Remove(filepath.Join(d.Root(), "changesets", accepted.Metadata.ID.Hex()+".yaml")); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	if refusal.CodeOf(err) != refusal.PinUnapproved || !strings.Contains(err.Error(), "the change-set of the pin it retired ("+retire.Spec.Base.String()+", in the registry's history) is not in the registry") {
		t.Fatalf("retired, its last pin's change-set gone: %v", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPropose || r.Target != "acme-echo" || r.Platforms != nil {
		t.Errorf("retired, its last pin's change-set gone: remedy %+v, want propose acme-echo (the operator names the rest)", r)
	}
}

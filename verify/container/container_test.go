package container_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/install"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/pipeline"
	pyrt "github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify"
	"github.com/cruxible/cruxprov/verify/container"
)

func TestMain(m *testing.M) {
	code := m.Run()
	imagetest.Cleanup()
	os.Exit(code)
}

// TestVerifyContainer: a signed image proposed with install --backend
// container and approved verifies; then each way it stops matching what
// was accepted is refused with its code — its builder key untrusted
// (image_signature_invalid), a pin naming another base than the signed
// provenance (provenance_mismatch), a pinned reference whose digest is not
// the pinned digest (image_digest_mismatch) — and an approver key never
// counts as the image's signer.
func TestVerifyContainer(t *testing.T) {
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s (the image's interpreter, on the host)", python)
	}
	ctx := context.Background()
	dir, h := imagetest.Base(t)
	shim := imagetest.Shim(t)
	work := testdir.New(t) // the store holds a sealed env
	c, err := invoketest.BuildContainer(ctx, work, image.LayoutPrefix+dir+"@"+h.String(), shim, imagetest.Platform)
	if err != nil {
		t.Fatal(err)
	}
	provWheel, _ := filepath.Glob(filepath.Join(work, "fixtures", "wheels", "acme_hostile-*.whl"))
	schema, _ := filepath.Glob(filepath.Join(work, "fixtures", "interfaces", "acme.hostile.json"))
	if len(provWheel) != 1 || len(schema) != 1 {
		t.Fatalf("fixtures: %v %v", provWheel, schema)
	}
	sb, _ := os.ReadFile(schema[0])
	st, err := store.Open(filepath.Join(work, "store"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := os.Open(provWheel[0])
	if err != nil {
		t.Fatal(err)
	}
	root, err := pipeline.OpenRoot(ctx, st, wf, filepath.Base(provWheel[0]), digest.Digest{})
	wf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	reg := registry.NewStub()
	approverPEM, approverPub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	approver, err := sign.LoadPrivateKey(approverPEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	approve := func(cs *registry.ChangeSet) {
		t.Helper()
		_, err := reg.Approve(ctx, cs.Metadata.ID, approver, nil)
		must(err)
	}
	_, err = reg.TrustKey(ctx, registry.Key{Name: "ops", Role: registry.RoleApprover, PEM: string(approverPub)}, "test")
	must(err)
	_, err = reg.RegisterInterface(ctx, "acme.hostile", sb)
	must(err)
	// Before the builder is trusted, no key can vouch for the image.
	if _, _, err := container.Materialization(ctx, reg, c.Image, root.Wheel.SHA256, digest.Digest{}, image.VerifyOptions{}); refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
		t.Fatalf("an image no trusted builder signed: %v", err)
	}
	tr, err := reg.TrustKey(ctx, registry.Key{Name: "ci", Role: registry.RoleBuilder, PEM: string(c.Key.Public().PEM())}, "test")
	must(err)
	approve(tr.ChangeSet)

	m, _, err := container.Materialization(ctx, reg, c.Image, root.Wheel.SHA256, digest.Digest{}, image.VerifyOptions{})
	must(err)
	propose := func(m registry.Materialization) {
		t.Helper()
		res, err := install.Install(ctx, st, reg, install.Options{
			Root: root, Platforms: []string{imagetest.Platform},
			Python: python, NoCompile: true, Containers: []registry.Materialization{m},
		})
		must(err)
		approve(res.ChangeSet)
	}
	propose(m)
	o := verify.Options{StateDir: t.TempDir()}
	rep, err := container.Verify(ctx, reg, c.Provider, o, container.Options{})
	if err != nil {
		t.Fatalf("the accepted image: %v", err)
	}
	// The runtime the verified provenance names picks the harness's argv
	// (invoke.Call.Runtime).
	if got := rep.Runtime(); got != c.Runtime || got != pyrt.RuntimeVersion {
		t.Errorf("Runtime() = %q, want %s", got, pyrt.RuntimeVersion)
	}
	var none *container.Report
	if got := none.Runtime(); got != "" {
		t.Errorf("a nil report's Runtime() = %q", got)
	}

	t.Run("provenance names another base", func(t *testing.T) {
		other := m
		other.Base = "sha256:" + strings.Repeat("0", 64)
		propose(other)
		if _, err := container.Verify(ctx, reg, c.Provider, o, container.Options{}); refusal.CodeOf(err) != refusal.ProvenanceMismatch {
			t.Fatalf("%v", err)
		}
		propose(m)
	})
	t.Run("reference and digest disagree", func(t *testing.T) {
		other := m
		other.Image = strings.Replace(m.Image, m.Digest.Hex(), strings.Repeat("1", 64), 1)
		propose(other)
		if _, err := container.Verify(ctx, reg, c.Provider, o, container.Options{}); refusal.CodeOf(err) != refusal.ImageDigestMismatch {
			t.Fatalf("%v", err)
		}
		propose(m)
	})
	t.Run("the layout is gone", func(t *testing.T) {
		// The pinned layout moved away, or its directory emptied: the
		// refusal says to put it back, or to propose another image
		// (it said to check the path, which the pin chose).
		ref, err := image.ParseRef(m.Image)
		if err != nil || ref.Layout == "" {
			t.Fatalf("the pinned image %s is no layout's: %v", m.Image, err)
		}
		aside := ref.Layout + ".aside"
		if err := os.Rename(ref.Layout, aside); err != nil {
			t.Fatal(err)
		}
		defer func() {
			os.RemoveAll(ref.Layout)
			if err := os.Rename(aside, ref.Layout); err != nil {
				t.Fatal(err)
			}
			if _, err := container.Verify(ctx, reg, c.Provider, o, container.Options{}); err != nil {
				t.Fatalf("the layout put back: %v", err)
			}
		}()
		for _, tc := range []struct{ name, what string }{
			{"gone", "its directory is gone"},
			{"empty", "the directory holds no oci-layout file"},
		} {
			if tc.name == "empty" {
				os.Mkdir(ref.Layout, 0o755)
			}
			_, err := container.Verify(ctx, reg, c.Provider, o, container.Options{})
			if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "the image the accepted pin of "+c.Provider+" names, "+m.Image+", is not there: no OCI image layout at "+ref.Layout+" ("+tc.what+"); put the layout back there") ||
				strings.Contains(err.Error(), "check the path") {
				t.Fatalf("%s: %v", tc.name, err)
			}
			r := refusal.RemedyOf(err)
			if r == nil || r.Action != refusal.ActionRestoreLayout || r.Target != ref.Layout || r.Or == nil {
				t.Fatalf("%s: remedy %+v, want %s of %s, or a proposal", tc.name, r, refusal.ActionRestoreLayout, ref.Layout)
			}
			// The proposal names the image to add, not the one gone.
			if p := r.Or; p.Action != refusal.ActionPropose || p.Backend != registry.BackendContainer || len(p.Images) != 0 ||
				len(p.Platforms) != 1 || p.Platforms[0] != imagetest.Platform || p.Python != python {
				t.Fatalf("%s: the other remedy %+v, want a proposal of a container for %s with %s", tc.name, p, imagetest.Platform, python)
			}
		}
	})
	t.Run("builder key untrusted", func(t *testing.T) {
		cs, _, err := reg.Propose(ctx, registry.Change{Action: registry.ActionUntrustKey, Key: &registry.Key{Name: "ci"}}, "test")
		must(err)
		approve(cs)
		if _, err := container.Verify(ctx, reg, c.Provider, o, container.Options{}); refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
			t.Fatalf("%v", err)
		}
	})
}

// TestBuilderKeyProposed: with no builder key trusted yet but one
// proposed, the refusal says to approve that change-set (it told the
// operator, who had proposed it, to trust a key with key trust).
func TestBuilderKeyProposed(t *testing.T) {
	ctx := context.Background()
	reg := registry.NewStub()
	_, rootPub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	_, ciPub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	// No key at all: the first is an approver's (key trust refuses a
	// builder's as the root of trust; walking docs/images.md, install
	// --backend container advised "key trust PUB --role builder" there).
	if _, err := container.BuilderKeys(ctx, reg); refusal.CodeOf(err) != refusal.ImageSignatureInvalid || !strings.Contains(err.Error(), "trust an approver's key first") ||
		!hasRemedy(err, refusal.ActionTrustKey, registry.RoleApprover) {
		t.Fatalf("no key at all: %v (remedy %+v, want trust_key approver)", err, refusal.RemedyOf(err))
	}
	if _, err := reg.TrustKey(ctx, registry.Key{Name: "ops", Role: registry.RoleApprover, PEM: string(rootPub)}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := container.BuilderKeys(ctx, reg); refusal.CodeOf(err) != refusal.ImageSignatureInvalid || !strings.Contains(err.Error(), "trust the CI's key, as a builder") ||
		!hasRemedy(err, refusal.ActionTrustKey, registry.RoleBuilder) {
		t.Fatalf("no builder key proposed: %v (remedy %+v, want trust_key builder)", err, refusal.RemedyOf(err))
	}
	tr, err := reg.TrustKey(ctx, registry.Key{Name: "ci", Role: registry.RoleBuilder, PEM: string(ciPub)}, "test")
	if err != nil || tr.ChangeSet == nil {
		t.Fatalf("propose the builder key: %v", err)
	}
	_, err = container.BuilderKeys(ctx, reg)
	if refusal.CodeOf(err) != refusal.ImageSignatureInvalid || !strings.Contains(err.Error(), "the change-set "+tr.ChangeSet.Metadata.ID.String()+" that trusts ci is proposed, not approved") ||
		!hasRemedy(err, refusal.ActionApprove, tr.ChangeSet.Metadata.ID.String()) {
		t.Errorf("a builder key proposed: %v (remedy %+v, want approve of it)", err, refusal.RemedyOf(err))
	}
}

// hasRemedy reports whether err carries the remedy action on target.
func hasRemedy(err error, action refusal.Action, target string) bool {
	r := refusal.RemedyOf(err)
	return r != nil && r.Action == action && r.Target == target
}

// TestNoProvenanceInputsAdviceFilled: a pinned container materialization
// that names no resolution, base or builder is refused advising the
// install that proposes it again with its image, its platforms filled in
// from the pin (a pin of images and no env names no interpreter): the
// install advised named --platform PLATFORM --python PYTHON, though the
// pin knew its platforms.
func TestNoProvenanceInputsAdviceFilled(t *testing.T) {
	ctx := context.Background()
	reg := registry.NewStub()
	approverPEM, approverPub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	approver, err := sign.LoadPrivateKey(approverPEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	_, ciPub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	approve := func(cs *registry.ChangeSet, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Approve(ctx, cs.Metadata.ID, approver, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.TrustKey(ctx, registry.Key{Name: "ops", Role: registry.RoleApprover, PEM: string(approverPub)}, "test"); err != nil {
		t.Fatal(err)
	}
	tr, err := reg.TrustKey(ctx, registry.Key{Name: "ci", Role: registry.RoleBuilder, PEM: string(ciPub)}, "test")
	if err != nil {
		t.Fatal(err)
	}
	approve(tr.ChangeSet, nil)
	sha := digest.Sum([]byte("wheel"))
	md := digest.Sum([]byte("image"))
	const platform = "cp311-manylinux_2_36_x86_64"
	img := "registry.example/acme/echo@" + md.String()
	c := registrytest.Change("acme-echo", "1.0.0")
	c.Provider.Package.SHA256 = sha
	c.Provider.Materializations = []registry.Materialization{
		{Backend: registry.BackendResolution, Platform: platform, Digest: digest.Sum([]byte("res")), Resolution: digest.Sum([]byte("res"))},
		{Backend: registry.BackendContainer, Platform: platform, Digest: md, Image: img},
	}
	cs, _, err := reg.Propose(ctx, c, "test")
	approve(cs, err)
	_, err = container.Verify(ctx, reg, "acme-echo", verify.Options{StateDir: t.TempDir()}, container.Options{})
	r := refusal.RemedyOf(err)
	if refusal.CodeOf(err) != refusal.ProvenanceMismatch || r == nil || r.Action != refusal.ActionPropose ||
		r.Target != "acme-echo==1.0.0@"+sha.String() || len(r.Images) != 1 || r.Images[0] != img ||
		len(r.Platforms) != 1 || r.Platforms[0] != platform || r.Python != "" {
		t.Fatalf("%v: remedy %+v, want propose acme-echo==1.0.0 with its image, platform %s and no interpreter", err, r, platform)
	}

	// Beside a local env made without bytecode, the install says so
	// (--no-compile): without it, it proposed another env than the pin's.
	res := digest.Sum([]byte("res"))
	env, err := digest.LocalMaterializationDigest(platform, digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.2"}, res, &digest.Root{Name: "acme-echo", Version: "1.0.0", SHA256: sha}, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Action = registry.ActionUpdate
	c.Provider.Materializations[0] = registry.Materialization{Backend: registry.BackendLocal, Platform: platform, Digest: env, Resolution: res, Seal: digest.Sum([]byte("seal")),
		Interpreter: registry.InterpreterLabel("/usr/bin/python3.11", "3.11.2", digest.Sum([]byte("python")))}
	cs, _, err = reg.Propose(ctx, c, "test")
	approve(cs, err)
	_, err = container.Verify(ctx, reg, "acme-echo", verify.Options{StateDir: t.TempDir()}, container.Options{})
	if r := refusal.RemedyOf(err); refusal.CodeOf(err) != refusal.ProvenanceMismatch || r == nil || r.Action != refusal.ActionPropose || r.Python != "/usr/bin/python3.11" || !r.NoBytecode {
		t.Fatalf("%v: remedy %+v, want propose with the env's interpreter and no bytecode", err, r)
	}
}

package image

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

const testPlatformARM = imagetest.PlatformARM

// TestBuildMultiPlatform: two platforms of two machines (x86_64 and
// aarch64) on a multi-platform base give an OCI image index of two
// manifests, each on its own architecture's base manifest, with that
// platform's wheels (the native provider has one wheel per machine);
// each manifest has its architecture's cruxshim (named in its provenance);
// the index and both manifests are signed, both carry their attestations,
// Verify accepts the index and each platform on its own with that
// platform's expectations, and skopeo reads the layout for either
// architecture. A base that lacks a platform's architecture is refused.
func TestBuildMultiPlatform(t *testing.T) {
	fx, client := testIndex(t)
	baseRef, baseDigests := imagetest.MultiArchBase(t, filepath.Join(t.TempDir(), "base"))
	key := testKey(t)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "oci")
	opts := Options{
		Root: pipelinetest.OpenRoot(t, st, fx.Native.Path), Platforms: []string{testPlatform, testPlatformARM},
		Client: client, Base: baseRef, Shims: map[string]string{testPlatform: testShim(t), testPlatformARM: imagetest.ShimFor(t, "arm64")},
		Epoch: time.Unix(1700000000, 0), Key: key, BuilderID: "https://ci.example/builder", Tool: testTool,
		Output: out,
	}
	res, err := Build(context.Background(), st, opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if res.MediaType != types.OCIImageIndex || len(res.Platforms) != 2 {
		t.Fatalf("a %s of %d platforms", res.MediaType, len(res.Platforms))
	}
	arches := map[string]PlatformImage{}
	for _, p := range res.Platforms {
		arches[p.Architecture] = p
	}
	amd, arm := arches["amd64"], arches["arm64"]
	if amd.Platform != testPlatform || arm.Platform != testPlatformARM || amd.Digest == arm.Digest {
		t.Fatalf("platforms %+v", res.Platforms)
	}
	for arch, p := range arches {
		if p.BaseDigest != baseDigests[arch] {
			t.Errorf("%s is on base %s, want %s", arch, p.BaseDigest, baseDigests[arch])
		}
	}
	if amd.Resolution == arm.Resolution || amd.Materialization == arm.Materialization {
		t.Errorf("both platforms resolved alike: the native library has one wheel per machine")
	}

	// The layout: the index under the provider's name, its entries with
	// their platforms, a signature for the index and for each manifest,
	// an attestation for each manifest.
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]v1.Hash{}
	for _, d := range tm.Manifests {
		tags[d.Annotations[refNameAnnotation]] = d.Digest
	}
	if tags["acme-native"] != res.Digest {
		t.Errorf("the layout names %v, not the index %s as acme-native", tags, res.Digest)
	}
	for _, want := range []string{SignatureTag(res.Digest), SignatureTag(amd.Digest), SignatureTag(arm.Digest), AttestationTag(amd.Digest), AttestationTag(arm.Digest)} {
		if _, ok := tags[want]; !ok {
			t.Errorf("no %s in the layout", want)
		}
	}
	ix, err := top.ImageIndex(res.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ix.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.Platform == nil || arches[d.Platform.Architecture].Digest != d.Digest {
			t.Errorf("index entry %s for %+v", d.Digest, d.Platform)
		}
	}

	// Each image holds its own machine's wheel of the native library.
	for arch, p := range arches {
		img, err := ix.Image(p.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || cf.Config.Labels[LabelPlatform] != p.Platform {
			t.Errorf("%s: config says %s, platform label %s", arch, cf.Architecture, cf.Config.Labels[LabelPlatform])
		}
		shim, err := os.ReadFile(opts.Shims[p.Platform])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(p.prov), hexOf(digest.Sum(shim))) {
			t.Errorf("%s: the provenance does not name its architecture's cruxshim", arch)
		}
		m := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
		if prov := string(p.prov); !strings.Contains(prov, "manylinux_2_17_"+m) || strings.Contains(prov, "manylinux_2_17_"+map[string]string{"amd64": "aarch64", "arm64": "x86_64"}[arch]) {
			t.Errorf("%s: the provenance does not name the %s wheel alone: %s", arch, m, prov)
		}
	}

	// Verify: the whole index, then each platform against its own pin.
	keys := []*sign.PublicKey{key.Public()}
	ref := LayoutPrefix + out + "@" + res.Digest.String()
	rep, err := Verify(context.Background(), ref, VerifyOptions{Keys: keys})
	if err != nil {
		t.Fatalf("Verify index: %v", err)
	}
	if !rep.Index || len(rep.Manifests) != 2 || rep.Signer == "" {
		t.Errorf("report %+v", rep)
	}
	for _, p := range res.Platforms {
		_, err := Verify(context.Background(), ref, VerifyOptions{Keys: keys, Platform: p.Platform, SkipBlobs: true, Expect: Expect{
			Resolution: p.Resolution, BaseDigest: p.BaseDigest.String(), BuilderID: "https://ci.example/builder",
		}})
		if err != nil {
			t.Errorf("Verify %s: %v", p.Platform, err)
		}
	}
	// One platform's pin does not verify the other's manifest.
	_, err = Verify(context.Background(), ref, VerifyOptions{Keys: keys, Platform: arm.Platform, SkipBlobs: true, Expect: Expect{Resolution: amd.Resolution}})
	if refusal.CodeOf(err) != refusal.ProvenanceMismatch {
		t.Errorf("the arm64 manifest against the amd64 resolution: %v, want provenance_mismatch", err)
	}

	// skopeo picks each architecture's image out of the index.
	if skopeo, err := exec.LookPath("skopeo"); err != nil {
		t.Log("skopeo is not installed: no oracle")
	} else {
		for arch, p := range arches {
			raw, err := exec.Command(skopeo, "--override-arch", arch, "inspect", "oci:"+out+":acme-native").CombinedOutput()
			if err != nil || !strings.Contains(string(raw), `"dev.cruxible.platform": "`+p.Platform+`"`) || !strings.Contains(string(raw), `"Architecture": "`+arch+`"`) {
				t.Errorf("skopeo --override-arch %s inspect: %v: %s", arch, err, raw)
			}
		}
		// skopeo copies the index with its digest, as a later CI step
		// copies it out of the layout: its entries carry no artifactType,
		// which Debian's skopeo 1.9 drops ("Manifest list must be
		// converted … Instructed to preserve digests").
		copied := filepath.Join(t.TempDir(), "copy")
		if raw, err := exec.Command(skopeo, "copy", "--all", "--preserve-digests", "oci:"+out+":acme-native", "oci:"+copied+":x").CombinedOutput(); err != nil {
			t.Errorf("skopeo copy --all --preserve-digests: %v: %s", err, raw)
		} else if b, err := os.ReadFile(filepath.Join(copied, "blobs", "sha256", res.Digest.Hex)); err != nil {
			t.Errorf("the copy does not hold the index %s: %v", res.Digest, err)
		} else if strings.Contains(string(b), "artifactType") {
			t.Errorf("the index names an artifactType: %s", b)
		}
	}

	// A single-architecture base cannot carry the arm64 image.
	dir, h := testBase(t)
	opts.Base, opts.Output = LayoutPrefix+dir+"@"+h.String(), filepath.Join(t.TempDir(), "oci")
	if _, err := Build(context.Background(), st, opts); refusal.CodeOf(err) != refusal.PlatformUnsupported {
		t.Errorf("arm64 on an amd64 base: %v, want platform_unsupported", err)
	}
}

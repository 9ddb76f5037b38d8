package image

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

func testKey(t *testing.T) *sign.PrivateKey {
	t.Helper()
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sign.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// copyDir copies a layout so that a case can tamper with its own copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "oci")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// TestVerifyLayout: a signed image in a layout verifies under its
// builder key, and each tampering is refused with its own code.
func TestVerifyLayout(t *testing.T) {
	res, out, key := signedBuild(t)
	other := testKey(t)
	if !res.Signed {
		t.Fatal("not signed")
	}
	d := res.Digest
	p := res.Platforms[0]
	ok := VerifyOptions{Keys: []*sign.PublicKey{key.Public()}, Expect: Expect{
		PackageSHA256: fxEcho(t), Resolution: p.Resolution, BaseDigest: p.BaseDigest.String(), BuilderID: "https://ci.example/builder",
	}}
	ref := func(dir string) string { return LayoutPrefix + dir + "@" + d.String() }

	// resign replaces the layout's cosign image under tag by one made by mk.
	replace := func(t *testing.T, dir, tag string, img v1.Image) {
		t.Helper()
		lp, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.ReplaceImage(img, match.Annotation(refNameAnnotation, tag), layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
			t.Fatal(err)
		}
	}
	envBlob := func(t *testing.T, dir string) string {
		lp, _ := layout.FromPath(dir)
		img, err := lp.Image(d)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := img.Manifest()
		l := m.Layers[len(m.Layers)-3] // the env layer
		return filepath.Join(dir, "blobs", "sha256", l.Digest.Hex)
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string) VerifyOptions
		want   refusal.Code
	}{
		{"ok", func(t *testing.T, dir string) VerifyOptions { return ok }, ""},
		{"no index.json (a build into the layout that did not finish)", func(t *testing.T, dir string) VerifyOptions {
			if err := os.Remove(filepath.Join(dir, "index.json")); err != nil {
				t.Fatal(err)
			}
			return ok
		}, refusal.FetchFailed},
		{"untrusted key", func(t *testing.T, dir string) VerifyOptions {
			o := ok
			o.Keys = []*sign.PublicKey{other.Public()}
			return o
		}, refusal.ImageSignatureInvalid},
		{"signature from an untrusted key", func(t *testing.T, dir string) VerifyOptions {
			body, _ := simpleSigning(res.Repo, d)
			sig, _ := other.Sign(body)
			img, _ := sigImage(body, sig)
			replace(t, dir, SignatureTag(d), img)
			return ok
		}, refusal.ImageSignatureInvalid},
		{"signature for another repository", func(t *testing.T, dir string) VerifyOptions {
			o := ok
			o.Repo = "registry.example/someone/else"
			return o
		}, refusal.ImageSignatureInvalid},
		{"signature of another digest", func(t *testing.T, dir string) VerifyOptions {
			body, _ := simpleSigning(res.Repo, p.BaseDigest)
			sig, _ := key.Sign(body)
			img, _ := sigImage(body, sig)
			replace(t, dir, SignatureTag(d), img)
			return ok
		}, refusal.ImageSignatureInvalid},
		{"flipped byte in a layer blob", func(t *testing.T, dir string) VerifyOptions {
			f := envBlob(t, dir)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			os.Chmod(f, 0o644)
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return ok
		}, refusal.ImageDigestMismatch},
		{"flipped byte in the config", func(t *testing.T, dir string) VerifyOptions {
			lp, _ := layout.FromPath(dir)
			img, _ := lp.Image(d)
			m, _ := img.Manifest()
			f := filepath.Join(dir, "blobs", "sha256", m.Config.Digest.Hex)
			b, _ := os.ReadFile(f)
			b[10] ^= 1
			os.WriteFile(f, b, 0o644)
			o := ok
			o.SkipBlobs = true
			return o
		}, refusal.ImageDigestMismatch},
		{"provenance naming another base", func(t *testing.T, dir string) VerifyOptions {
			var prov Provenance
			json.Unmarshal(p.prov, &prov)
			prov.BuildDefinition.InternalParameters.BaseDigest = "sha256:" + strings.Repeat("0", 64)
			pb, _ := json.Marshal(prov)
			var envs [][]byte
			for _, a := range []struct {
				typ  string
				pred []byte
			}{{SLSAProvenanceType, pb}, {CycloneDXType, p.sbom}} {
				st, _ := statement(res.Repo, d, a.typ, rawJSON(a.pred))
				e, _ := envelope(key, st)
				envs = append(envs, e)
			}
			img, _ := attImage(envs, []string{SLSAProvenanceType, CycloneDXType})
			replace(t, dir, AttestationTag(d), img)
			return ok
		}, refusal.ProvenanceMismatch},
		{"pin expects another package", func(t *testing.T, dir string) VerifyOptions {
			o := ok
			o.Expect.PackageSHA256 = p.Resolution
			return o
		}, refusal.ProvenanceMismatch},
		{"pin expects another builder", func(t *testing.T, dir string) VerifyOptions {
			o := ok
			o.Expect.BuilderID = "https://evil.example"
			return o
		}, refusal.ProvenanceMismatch},
		{"attestations missing", func(t *testing.T, dir string) VerifyOptions {
			lp, _ := layout.FromPath(dir)
			lp.RemoveDescriptors(match.Annotation(refNameAnnotation, AttestationTag(d)))
			return ok
		}, refusal.ProvenanceMismatch},
		{"a platform the image does not hold", func(t *testing.T, dir string) VerifyOptions {
			o := ok
			o.Platform = "cp312-manylinux_2_36_x86_64"
			return o
		}, refusal.PlatformUnsupported},
		{"signature missing", func(t *testing.T, dir string) VerifyOptions {
			lp, _ := layout.FromPath(dir)
			lp.RemoveDescriptors(match.Annotation(refNameAnnotation, SignatureTag(d)))
			return ok
		}, refusal.ImageSignatureInvalid},
	}
	// What an image_signature_invalid says to do: walking images.md,
	// each said only what was wrong ("has no signature (no ….sig)", "no
	// valid signature under a trusted key: a signature under no trusted
	// key"), never a next step.
	todo := map[string]string{
		"untrusted key":                    "(trust the public key of the builder that signed it (as a builder key), if it is one, or build it again signed with a trusted builder key)",
		"signature from an untrusted key":  "(trust the public key of the builder that signed it (as a builder key), if it is one, or build it again signed with a trusted builder key)",
		"signature for another repository": "(read it from the repository it was signed for, or build it again signed for registry.example/someone/else)",
		"signature of another digest":      "(build it again signed with a trusted builder key)",
		"signature missing":                ": build it again signed with a builder's key, or, copying it, copy its " + SignatureTag(d) + " and " + AttestationTag(d) + " tags with it",
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, out)
			o := c.tamper(t, dir)
			rep, err := Verify(context.Background(), ref(dir), o)
			if got := refusal.CodeOf(err); got != c.want {
				t.Fatalf("code %q, want %q (err %v)", got, c.want, err)
			}
			if c.want == "" && (len(rep.Manifests) != 1 || rep.Manifests[0].BlobsRehashed < 4 || !rep.Manifests[0].SBOM) {
				t.Errorf("report %+v", rep)
			}
			var re *refusal.Error
			if c.want != "" && !errors.As(err, &re) {
				t.Errorf("not a *refusal.Error: %T", err)
			}
			if c.want == refusal.ImageSignatureInvalid && !strings.HasSuffix(err.Error(), todo[c.name]) {
				t.Errorf("%v: want it to end in %q", err, todo[c.name])
			}
			// It names the platforms there are: it said only "has no
			// image for P".
			if c.want == refusal.PlatformUnsupported && !strings.HasSuffix(err.Error(), " has no image for cp312-manylinux_2_36_x86_64: it holds "+p.Platform+"; name one of those") {
				t.Errorf("the refusal does not name the platforms the image holds: %v", err)
			}
			// It names the image and what to do: a flipped layer byte
			// said "blob sha256:… hashes to sha256:…" alone.
			if c.want == refusal.ImageDigestMismatch && (!strings.Contains(err.Error(), ref(dir)) ||
				!strings.HasSuffix(err.Error(), "(the layout does not hold the image as it was built: damaged, or changed since; write the image into it again, by building it again or copying it from its registry)")) {
				t.Errorf("the refusal names neither the image nor what to do: %v", err)
			}
		})
	}
}

func fxEcho(t *testing.T) digest.Digest {
	fx, _ := testIndex(t)
	return fx.Echo.SHA256
}

// TestVerifyRegistryNotReached: a registry that cannot be asked, or that
// fails, is fetch_failed (check the host and the network), not
// image_digest_mismatch; one that answers it does not hold the pinned
// image still is image_digest_mismatch (pull or rebuild it).
func TestVerifyRegistryNotReached(t *testing.T) {
	ctx := context.Background()
	keys := []*sign.PublicKey{testKey(t).Public()}
	pinned := "/acme/echo@sha256:" + strings.Repeat("ab", 32)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	serve := func(manifest int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/" {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(manifest)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	for _, c := range []struct {
		name, host string
		want       refusal.Code
	}{
		{"connection refused", closed, refusal.FetchFailed},
		{"the registry fails", serve(http.StatusServiceUnavailable), refusal.FetchFailed},
		{"credentials refused", serve(http.StatusForbidden), refusal.FetchFailed},
		{"the pinned image is not there", serve(http.StatusNotFound), refusal.ImageDigestMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify(ctx, c.host+pinned, VerifyOptions{Keys: keys})
			if got := refusal.CodeOf(err); got != c.want {
				t.Fatalf("got %v (%s), want %s", err, got, c.want)
			}
			if c.want == refusal.ImageDigestMismatch && !strings.Contains(err.Error(), " (the registry does not serve the image as it was built: a mistyped digest, or the image missing, damaged or changed there; check the digest, or push the image again from where it was built)") {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
		})
	}
}

// TestVerifyMissingLayout: a layout directory that is not there (a
// mistyped path) is not a registry out of reach, nor a digest missing
// from a layout: it says there is no layout there. A layout that exists
// but lacks the digest is image_digest_mismatch.
func TestVerifyMissingLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	_, err := Verify(context.Background(), "oci:"+dir+"@sha256:"+strings.Repeat("ab", 32), VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
	if refusal.CodeOf(err) != refusal.FetchFailed || strings.Contains(err.Error(), "registry") || !strings.Contains(err.Error(), "no OCI image layout at "+dir) {
		t.Fatalf("no layout: %v", err)
	}
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	_, err = Verify(context.Background(), "oci:"+dir+"@sha256:"+strings.Repeat("ab", 32), VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
	if refusal.CodeOf(err) != refusal.ImageDigestMismatch {
		t.Fatalf("a layout without the digest: %v", err)
	}
}

// TestVerifyUntrustedSignatureDetail: image verify under a key that
// signed none of the image's signatures says why as a sentence: it
// printed a Go slice, "no valid signature under a trusted key ([a
// signature under no trusted key])" (seen walking ci.md with the
// approver's key given for the builder's), and the reasons of two
// signatures (a second builder's beside the first) would have run
// together with a space between them.
func TestVerifyUntrustedSignatureDetail(t *testing.T) {
	res, out, _ := signedBuild(t)
	_, err := Verify(context.Background(), LayoutPrefix+out+"@"+res.Digest.String(), VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
	if refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
		t.Fatalf("code %q, want image_signature_invalid (err %v)", refusal.CodeOf(err), err)
	}
	detail := err.Error()
	if strings.ContainsAny(detail, "[]") || !strings.Contains(detail, "no valid signature under a trusted key: a signature under no trusted key (") {
		t.Errorf("detail %q, want \"no valid signature under a trusted key: a signature under no trusted key (\" and what to do", detail)
	}
}

// TestVerifyLayoutMistypedDigest: a digest the layout holds no blob of
// is refused image_digest_mismatch saying to check the digest; it said
// the layout did not hold the image "as it was built: damaged, or
// changed since" alone, of a layout that held the image under its own
// digest, whole (walking images.md with a digest copied from another
// build). A blob of the image damaged is still told to write it again.
func TestVerifyLayoutMistypedDigest(t *testing.T) {
	res, out, key := signedBuild(t)
	o := VerifyOptions{Keys: []*sign.PublicKey{key.Public()}}
	wrong := "sha256:" + strings.Repeat("0", 63) + "1"
	if wrong == res.Digest.String() {
		t.Fatal("the build's digest is the wrong one")
	}
	_, err := Verify(context.Background(), LayoutPrefix+out+"@"+wrong, o)
	if refusal.CodeOf(err) != refusal.ImageDigestMismatch || !strings.Contains(err.Error(), "the layout holds no image of that digest: a mistyped digest") ||
		!strings.Contains(err.Error(), "check the digest") || strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a digest the layout holds no blob of: %v", err)
	}
	if _, err := Verify(context.Background(), LayoutPrefix+out+"@"+res.Digest.String(), o); err != nil {
		t.Fatalf("the build's own digest: %v", err)
	}
}

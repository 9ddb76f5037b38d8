package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// keysLayout is a copy of the shared signed build's layout in which a
// test writes documents with a key twice, each under a digest of its own
// and signed and attested as a build would, so that nothing but the
// key check can refuse them.
type keysLayout struct {
	t    *testing.T
	dir  string
	res  *Result
	p    PlatformImage
	key  *sign.PrivateKey
	repo string // the repository the signatures name
}

func newKeysLayout(t *testing.T) *keysLayout {
	t.Helper()
	res, out, key := signedBuild(t)
	return &keysLayout{t: t, dir: copyDir(t, out), res: res, p: res.Platforms[0], key: key, repo: res.Repo}
}

func (k *keysLayout) path() layout.Path {
	lp, err := layout.FromPath(k.dir)
	if err != nil {
		k.t.Fatal(err)
	}
	return lp
}

// put writes b as a blob and returns its digest.
func (k *keysLayout) put(b []byte) v1.Hash {
	k.t.Helper()
	sum := sha256.Sum256(b)
	h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if err := os.WriteFile(filepath.Join(k.dir, "blobs", "sha256", h.Hex), b, 0o644); err != nil {
		k.t.Fatal(err)
	}
	return h
}

func (k *keysLayout) blob(h v1.Hash) []byte {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.dir, "blobs", "sha256", h.Hex))
	if err != nil {
		k.t.Fatal(err)
	}
	return b
}

// tag makes index.json's entry for tag the manifest raw (of media type
// mt), written as a blob; it returns its digest.
func (k *keysLayout) tag(tag string, mt types.MediaType, raw []byte) v1.Hash {
	k.t.Helper()
	h := k.put(raw)
	lp := k.path()
	if err := lp.RemoveDescriptors(match.Annotation(refNameAnnotation, tag)); err != nil {
		k.t.Fatal(err)
	}
	if err := lp.AppendDescriptor(v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: h, Annotations: map[string]string{refNameAnnotation: tag}}); err != nil {
		k.t.Fatal(err)
	}
	return h
}

// replace makes img the cosign image under tag.
func (k *keysLayout) replace(tag string, img v1.Image) {
	k.t.Helper()
	if err := k.path().ReplaceImage(img, match.Annotation(refNameAnnotation, tag), layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
		k.t.Fatal(err)
	}
}

// payload is the simple-signing payload of d, as a build signs it.
func (k *keysLayout) payload(d v1.Hash) []byte {
	k.t.Helper()
	b, err := simpleSigning(k.repo, d)
	if err != nil {
		k.t.Fatal(err)
	}
	return b
}

// signPayload stores body, signed by the build's key, as d's signature.
func (k *keysLayout) signPayload(d v1.Hash, body []byte) {
	k.t.Helper()
	sig, err := k.key.Sign(body)
	if err != nil {
		k.t.Fatal(err)
	}
	img, err := sigImage(body, sig)
	if err != nil {
		k.t.Fatal(err)
	}
	k.replace(SignatureTag(d), img)
}

// statements are the build's provenance and SBOM statements about d.
func (k *keysLayout) statements(d v1.Hash) [2][]byte {
	k.t.Helper()
	var out [2][]byte
	for i, a := range []struct {
		typ  string
		pred []byte
	}{{SLSAProvenanceType, k.p.prov}, {CycloneDXType, k.p.sbom}} {
		st, err := statement(k.repo, d, a.typ, rawJSON(a.pred))
		if err != nil {
			k.t.Fatal(err)
		}
		out[i] = st
	}
	return out
}

// attestEnvelopes stores envs as d's attestations.
func (k *keysLayout) attestEnvelopes(d v1.Hash, envs [2][]byte) {
	k.t.Helper()
	img, err := attImage(envs[:], []string{SLSAProvenanceType, CycloneDXType})
	if err != nil {
		k.t.Fatal(err)
	}
	k.replace(AttestationTag(d), img)
}

// attest stores sts, each in an envelope signed by the build's key, as
// d's attestations.
func (k *keysLayout) attest(d v1.Hash, sts [2][]byte) {
	k.t.Helper()
	var envs [2][]byte
	for i, st := range sts {
		e, err := envelope(k.key, st)
		if err != nil {
			k.t.Fatal(err)
		}
		envs[i] = e
	}
	k.attestEnvelopes(d, envs)
}

// signed signs and attests d as a build does.
func (k *keysLayout) signed(d v1.Hash) {
	k.signPayload(d, k.payload(d))
	k.attest(d, k.statements(d))
}

// insert is b with add put after the first occurrence of at.
func insert(t *testing.T, b []byte, at, add string) []byte {
	t.Helper()
	i := bytes.Index(b, []byte(at))
	if i < 0 {
		t.Fatalf("%q is not in %s", at, b)
	}
	i += len(at)
	return append(append(append([]byte(nil), b[:i]...), add...), b[i:]...)
}

func (k *keysLayout) options() VerifyOptions {
	return VerifyOptions{Keys: []*sign.PublicKey{k.key.Public()}, Expect: Expect{
		PackageSHA256: fxEcho(k.t), Resolution: k.p.Resolution, BaseDigest: k.p.BaseDigest.String(), BuilderID: "https://ci.example/builder",
	}}
}

// manifestKeyTwice writes the image's manifest again with "layers" said
// twice (the first an empty list: the last is what go-containerregistry
// reads), signed and attested: its digest.
func (k *keysLayout) manifestKeyTwice() v1.Hash {
	raw := insert(k.t, k.blob(k.p.Digest), `{`, `"layers":[],`)
	d := k.tag("acme-echo-twice", types.OCIManifestSchema1, raw)
	k.signed(d)
	return d
}

// TestVerifyRefusesAKeyTwice: every document Verify reads with a key
// twice in one object, or two cases of one field's key, is refused in
// one line naming the document and the key, though its digest, its
// signature and what the last of the keys says are all as a build makes
// them (each case verifies with the key check left out):
// image_digest_mismatch for the image's manifest, index or config (and a
// layout's index.json), image_signature_invalid for a cosign document.
func TestVerifyRefusesAKeyTwice(t *testing.T) {
	base := signedBaseDigest(t)
	cases := []struct {
		name string
		// make writes the case into k and returns the digest to verify.
		make func(k *keysLayout) v1.Hash
		code refusal.Code
		// says is what the refusal must say, with "@D@" for the digest
		// verified.
		says []string
	}{
		{"the manifest", func(k *keysLayout) v1.Hash { return k.manifestKeyTwice() },
			refusal.ImageDigestMismatch, []string{`the manifest @D@ has the key "layers" twice: one reader takes the first, another the last (` + ambiguousImage + ")"}},
		{"the config", func(k *keysLayout) v1.Hash {
			m := k.blob(k.p.Digest)
			var cfg v1.Hash
			mf, err := v1.ParseManifest(bytes.NewReader(m))
			if err != nil {
				t.Fatal(err)
			}
			cfg = mf.Config.Digest
			c := insert(t, k.blob(cfg), `"Labels":{`, `"`+LabelPackage+`":"sha256:`+strings.Repeat("0", 64)+`",`)
			nc := k.put(c)
			m = bytes.Replace(m, []byte(cfg.String()), []byte(nc.String()), 1)
			m = bytes.Replace(m, []byte(`"size":`+itoa(mf.Config.Size)), []byte(`"size":`+itoa(int64(len(c)))), 1)
			d := k.tag("acme-echo-twice", types.OCIManifestSchema1, m)
			k.signed(d)
			return d
		}, refusal.ImageDigestMismatch, []string{`the config sha256:`, ` of the manifest @D@ has the key "` + LabelPackage + `" twice in its object at config.Labels: one reader takes the first, another the last (` + ambiguousImage + ")"}},
		{"an index (two cases of one field's key)", func(k *keysLayout) v1.Hash {
			m := k.blob(k.p.Digest)
			ix := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","Manifests":[],"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":` + itoa(int64(len(m))) + `,"digest":"` + k.p.Digest.String() + `","platform":{"architecture":"amd64","os":"linux"}}]}`)
			d := k.tag("acme-echo-index", types.OCIImageIndex, ix)
			k.signPayload(d, k.payload(d))
			return d
		}, refusal.ImageDigestMismatch, []string{`the index @D@ has the keys "Manifests" and "manifests", which Go's decoder reads as one field "manifests", the last, and another reader as two (` + ambiguousImage + ")"}},
		{"the layout's index.json", func(k *keysLayout) v1.Hash {
			f := filepath.Join(k.dir, "index.json")
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, insert(t, b, `{`, `"manifests":[],`), 0o644); err != nil {
				t.Fatal(err)
			}
			return k.p.Digest
		}, refusal.ImageDigestMismatch, []string{`index.json has the key "manifests" twice: one reader takes the first, another the last (the layout does not hold the image as it was built`}},
		{"the signature's manifest", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			h, ok, err := layoutSource(k.dir).tag(context.Background(), SignatureTag(d))
			if err != nil || !ok {
				t.Fatalf("no signature: %v", err)
			}
			k.tag(SignatureTag(d), types.OCIManifestSchema1, insert(t, k.blob(h), `{`, `"layers":[],`))
			return d
		}, refusal.ImageSignatureInvalid, []string{`of sha256-`, `.sig has the key "layers" twice: one reader takes the first, another the last (` + unsignedKeysTodo + ")"}},
		{"the attestations' manifest", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			h, ok, err := layoutSource(k.dir).tag(context.Background(), AttestationTag(d))
			if err != nil || !ok {
				t.Fatalf("no attestations: %v", err)
			}
			k.tag(AttestationTag(d), types.OCIManifestSchema1, insert(t, k.blob(h), `{`, `"layers":[],`))
			return d
		}, refusal.ImageSignatureInvalid, []string{`.att has the key "layers" twice`, unsignedKeysTodo}},
		{"the signed payload", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			k.signPayload(d, insert(t, k.payload(d), `"image":{`, `"docker-manifest-digest":"`+base.String()+`",`))
			return d
		}, refusal.ImageSignatureInvalid, []string{`the signed payload of sha256-`, `.sig (layer sha256:`, `, signed by the key sha256:`, `) has the key "docker-manifest-digest" twice in its object at critical.image: one reader takes the first, another the last (` + signedKeysTodo + ")"}},
		{"a DSSE envelope", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			sts := k.statements(d)
			var envs [2][]byte
			for i, st := range sts {
				e, err := envelope(k.key, st)
				if err != nil {
					t.Fatal(err)
				}
				envs[i] = e
			}
			envs[0] = insert(t, envs[0], `{`, `"payload":"`+base64.StdEncoding.EncodeToString([]byte(`{}`))+`",`)
			k.attestEnvelopes(d, envs)
			return d
		}, refusal.ImageSignatureInvalid, []string{`the DSSE envelope of sha256-`, `.att (layer sha256:`, `) has the key "payload" twice: one reader takes the first, another the last (` + unsignedKeysTodo + ")"}},
		{"an in-toto statement", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			sts := k.statements(d)
			sts[0] = insert(t, sts[0], `{`, `"subject":[{"name":"x","digest":{"sha256":"`+base.Hex+`"}}],`)
			k.attest(d, sts)
			return d
		}, refusal.ImageSignatureInvalid, []string{`the in-toto statement of sha256-`, `, signed by the key sha256:`, `) has the key "subject" twice: one reader takes the first, another the last (` + signedKeysTodo + ")"}},
		{"a provenance (two cases of one field's key)", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			sts := k.statements(d)
			sts[0] = insert(t, sts[0], `"predicate":{`, `"BuildDefinition":{"internalParameters":{"baseDigest":"sha256:`+strings.Repeat("0", 64)+`"}},`)
			k.attest(d, sts)
			return d
		}, refusal.ImageSignatureInvalid, []string{`has the keys "BuildDefinition" and "buildDefinition" in its object at predicate, which Go's decoder reads as one field "buildDefinition", the last, and another reader as two (` + signedKeysTodo + ")"}},
		{"an SBOM", func(k *keysLayout) v1.Hash {
			d := k.p.Digest
			sts := k.statements(d)
			sts[1] = insert(t, sts[1], `"predicate":{`, `"bomFormat":"SPDX",`)
			k.attest(d, sts)
			return d
		}, refusal.ImageSignatureInvalid, []string{`has the key "bomFormat" twice in its object at predicate`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := newKeysLayout(t)
			d := c.make(k)
			ref := LayoutPrefix + k.dir + "@" + d.String()
			_, err := Verify(context.Background(), ref, k.options())
			t.Log(err)
			if got := refusal.CodeOf(err); got != c.code {
				t.Fatalf("code %q, want %q (err %v)", got, c.code, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("not one line: %q", msg)
			}
			for _, s := range c.says {
				if s = strings.ReplaceAll(s, "@D@", d.String()); !strings.Contains(msg, s) {
					t.Errorf("%v\ndoes not say %q", err, s)
				}
			}
		})
	}
}

// signedBaseDigest is the digest of the shared build's base: another
// image's, for a document to name first.
func signedBaseDigest(t *testing.T) v1.Hash {
	res, _, _ := signedBuild(t)
	return res.Platforms[0].BaseDigest
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestVerifyRegistryRefusesAKeyTwice: what TestVerifyRefusesAKeyTwice
// holds of a layout holds of a registry (go-containerregistry's in-memory
// one, and Debian's docker-registry where it is installed), which stores
// and serves a manifest with a key twice as it was pushed: the image's
// manifest so is image_digest_mismatch, its .sig manifest so
// image_signature_invalid. The same images with each key once verify.
func TestVerifyRegistryRefusesAKeyTwice(t *testing.T) {
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(mem.Close)
	hosts := map[string]string{"in-memory": strings.TrimPrefix(mem.URL, "http://")}
	if _, err := exec.LookPath("docker-registry"); err == nil {
		hosts["docker-registry"] = startDockerRegistry(t)
	} else {
		t.Log("docker-registry is not installed: testing the in-memory registry only")
	}
	for kind, host := range hosts {
		t.Run(kind, func(t *testing.T) {
			k := newKeysLayout(t)
			k.repo = host + "/acme/echo"
			k.signed(k.p.Digest)
			twice := k.manifestKeyTwice()
			// The .sig of the image as built, said with "layers" twice,
			// under a tag of its own: the image's is pushed as it is.
			sigTwice := k.tag("sig-twice", types.OCIManifestSchema1, insert(t, k.sigManifest(k.p.Digest), `{`, `"layers":[],`))
			push := func(tag string, h v1.Hash) {
				t.Helper()
				img, err := k.path().Image(h)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := name.NewTag(k.repo + ":" + tag)
				if err != nil {
					t.Fatal(err)
				}
				if err := remote.Write(ref, img); err != nil {
					t.Fatalf("push %s: %v", ref, err)
				}
			}
			for _, d := range []v1.Hash{k.p.Digest, twice} {
				push(strings.ReplaceAll(d.String(), ":", "-"), d)
				for _, tag := range []string{SignatureTag(d), AttestationTag(d)} {
					h, ok, err := layoutSource(k.dir).tag(context.Background(), tag)
					if err != nil || !ok {
						t.Fatalf("%s: %v", tag, err)
					}
					push(tag, h)
				}
			}
			o := k.options()
			if _, err := Verify(context.Background(), k.repo+"@"+k.p.Digest.String(), o); err != nil {
				t.Fatalf("the image as built: %v", err)
			}
			_, err := Verify(context.Background(), k.repo+"@"+twice.String(), o)
			if refusal.CodeOf(err) != refusal.ImageDigestMismatch || !strings.Contains(err.Error(), k.repo+"@"+twice.String()+`: the manifest `+twice.String()+` has the key "layers" twice: one reader takes the first, another the last (`+ambiguousImage+")") {
				t.Errorf("the manifest with a key twice: %v", err)
			}
			push(SignatureTag(k.p.Digest), sigTwice)
			_, err = Verify(context.Background(), k.repo+"@"+k.p.Digest.String(), o)
			if refusal.CodeOf(err) != refusal.ImageSignatureInvalid || !strings.Contains(err.Error(), "the manifest "+sigTwice.String()+" of "+SignatureTag(k.p.Digest)+` has the key "layers" twice`) {
				t.Errorf("the signature's manifest with a key twice: %v", err)
			}
		})
	}
}

// sigManifest is the manifest of d's signature.
func (k *keysLayout) sigManifest(d v1.Hash) []byte {
	k.t.Helper()
	h, ok, err := layoutSource(k.dir).tag(context.Background(), SignatureTag(d))
	if err != nil || !ok {
		k.t.Fatalf("no signature of %s: %v", d, err)
	}
	return k.blob(h)
}

// TestBaseRefusesAKeyTwice: a build's base whose index, manifest or
// config has a key twice is refused image_digest_mismatch, naming the
// base, the document and the key and saying to pin another base (not to
// write it into the layout again: its digest names those bytes).
func TestBaseRefusesAKeyTwice(t *testing.T) {
	_, d, dir := randomBaseLayout(t)
	k := &keysLayout{t: t, dir: dir}
	raw := k.blob(d)
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		make func() v1.Hash
		says string
	}{
		{"the manifest", func() v1.Hash {
			return k.put(insert(t, raw, `{`, `"layers":[],`))
		}, `the manifest @D@ has the key "layers" twice`},
		{"the config", func() v1.Hash {
			c := insert(t, k.blob(m.Config.Digest), `{`, `"architecture":"arm64",`)
			nc := k.put(c)
			nm := bytes.Replace(raw, []byte(m.Config.Digest.String()), []byte(nc.String()), 1)
			nm = bytes.Replace(nm, []byte(`"size":`+itoa(m.Config.Size)), []byte(`"size":`+itoa(int64(len(c)))), 1)
			return k.put(nm)
		}, `the config sha256:`},
		{"an index", func() v1.Hash {
			return k.put([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[],"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":` + itoa(int64(len(raw))) + `,"digest":"` + d.String() + `","platform":{"architecture":"amd64","os":"linux"}}]}`))
		}, `the index @D@ has the key "manifests" twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.make()
			ref, err := ParseRef(LayoutPrefix + dir + "@" + h.String())
			if err != nil {
				t.Fatal(err)
			}
			_, err = loadBase(context.Background(), ref, "linux", "amd64", nil)
			t.Log(err)
			says := strings.ReplaceAll(c.says, "@D@", h.String())
			if refusal.CodeOf(err) != refusal.ImageDigestMismatch || !strings.Contains(err.Error(), "the base image "+ref.String()+": ") ||
				!strings.Contains(err.Error(), says) || !strings.HasSuffix(err.Error(), " ("+ambiguousBase+")") {
				t.Errorf("%v, want image_digest_mismatch naming %s, saying %q and what to do", err, ref, says)
			}
		})
	}
}

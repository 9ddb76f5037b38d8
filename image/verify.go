package image

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// VerifyOptions say what an image must be to be accepted.
type VerifyOptions struct {
	// Keys are the trusted builder keys; a signature or an attestation
	// counts only under one of them.
	Keys []*sign.PublicKey
	// Repo is the repository the signature must name (its
	// docker-reference, which cosign never checks); "" means the
	// registry reference's own repository, and no check for a layout.
	// Both are compared as repositories (RepoName): acme/echo and
	// docker.io/acme/echo are one.
	Repo string
	// Platform picks one platform of an index ("" checks every one).
	Platform string
	// Expect is the accepted artifact the provenance must match; zero
	// fields are not checked.
	Expect Expect
	// SkipBlobs leaves the layers unread: the manifests, configs,
	// signatures and attestations are still rehashed. Without it every
	// layer blob is read and rehashed too.
	SkipBlobs bool
	// Remote are go-containerregistry options for a registry (nil: the
	// credentials of the docker config, authn.DefaultKeychain, as docker
	// and podman read them: $DOCKER_CONFIG/config.json or
	// ~/.docker/config.json, anonymous without one).
	Remote []remote.Option
}

// Expect is what an accepted pin says the image was built from.
type Expect struct {
	PackageSHA256 digest.Digest
	Resolution    digest.Digest
	BaseDigest    string
	BuilderID     string
}

// Report is what Verify found, filled in as far as it got.
type Report struct {
	Reference string           `json:"reference"`
	Digest    v1.Hash          `json:"digest"`
	Index     bool             `json:"index"`
	Signer    string           `json:"signer,omitempty"` // the index's signer key digest
	Manifests []ManifestReport `json:"manifests"`
}

// ManifestReport is one platform's manifest.
type ManifestReport struct {
	Digest        v1.Hash           `json:"digest"`
	Platform      string            `json:"platform"`
	Signer        string            `json:"signer"` // the key digest
	SignedRepo    string            `json:"signed_repo"`
	Provenance    *Provenance       `json:"provenance,omitempty"`
	SBOM          bool              `json:"sbom"`
	Labels        map[string]string `json:"labels,omitempty"`
	BlobsRehashed int               `json:"blobs_rehashed"`
}

// Verify checks the image ref (REF@sha256:… or oci:DIR@sha256:…) fails
// closed: every manifest, config and blob it reads is rehashed against
// its digest (image_digest_mismatch: go-containerregistry does not check
// what it reads from a layout); each platform manifest (and an index)
// must carry a cosign signature under one of o.Keys whose payload names
// that digest and the expected repository, and a signed SLSA v1
// provenance and CycloneDX SBOM about it (image_signature_invalid); the
// provenance must agree with the image's labels and with o.Expect
// (provenance_mismatch).
func Verify(ctx context.Context, ref string, o VerifyOptions) (*Report, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	rep, err := verify(ctx, r, ref, o)
	return rep, notAsBuilt(r, err)
}

// notAsBuilt adds to an image_digest_mismatch refusal of Verify the
// image it is about and what to do: a blob of a layout that did not
// rehash was refused "blob sha256:… hashes to sha256:…" alone, naming
// neither the image nor a next step (DESIGN §2).
func notAsBuilt(r Ref, err error) error {
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.ImageDigestMismatch {
		return err
	}
	out := *re
	if !strings.Contains(out.Detail, r.String()) {
		out.Detail = r.String() + ": " + out.Detail
	}
	// The digest names a document two readers read two ways: it is the
	// image, not its copy, that is wrong (a layout's index.json, which no
	// digest names, is damage to the layout, below).
	if pinnedKeys(err) {
		out.Detail += " (" + ambiguousImage + ")"
		return &out
	}
	if r.Repo == nil && errors.As(err, new(*layoutIndexError)) {
		out.Detail += " (the layout does not hold the image as it was built: " + damagedIndex + ")"
	} else if r.Repo == nil && noBlob(r) {
		// No blob of the digest at all: a digest mistyped (or another
		// layout's) is the likelier cause, and was told only that the
		// layout was damaged.
		out.Detail += " (the layout holds no image of that digest: a mistyped digest, or an image never written into this layout; check the digest against the one its build printed, or write the image into the layout, by building it again or copying it from its registry)"
	} else if r.Repo == nil {
		out.Detail += " (the layout does not hold the image as it was built: damaged, or changed since; write the image into it again, by building it again or copying it from its registry)"
	} else {
		out.Detail += " (the registry does not serve the image as it was built: a mistyped digest, or the image missing, damaged or changed there; check the digest, or push the image again from where it was built)"
	}
	return &out
}

// noBlob reports whether the layout r names holds no file for r's digest.
func noBlob(r Ref) bool {
	_, err := os.Lstat(filepath.Join(r.Layout, "blobs", r.Digest.Algorithm, r.Digest.Hex))
	return errors.Is(err, fs.ErrNotExist)
}

func verify(ctx context.Context, r Ref, ref string, o VerifyOptions) (*Report, error) {
	if len(o.Keys) == 0 {
		return nil, refusal.New(refusal.ImageSignatureInvalid, "no trusted key to verify %s with", ref)
	}
	repo := o.Repo
	if repo == "" && r.Repo != nil {
		repo = r.Repo.Name()
	}
	if o.Remote == nil {
		o.Remote = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	}
	src := openSource(r, o.Remote)
	rep := &Report{Reference: r.String(), Digest: r.Digest}
	raw, err := src.manifest(ctx, r.Digest)
	if err != nil {
		return rep, readErr(r, err)
	}
	var probe struct {
		MediaType types.MediaType `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return rep, refusal.Wrap(refusal.ImageDigestMismatch, err, "%s is not a manifest", ref)
	}
	type todo struct {
		d   v1.Hash
		raw []byte
	}
	var list []todo
	if probe.MediaType.IsIndex() || (probe.MediaType == "" && probe.Manifests != nil) {
		rep.Index = true
		// A manifest is checked as loadImage reads it.
		if err := imageDocKeys(raw, manifestDocType, "the index "+r.Digest.String()); err != nil {
			return rep, err
		}
		if rep.Signer, _, err = checkSignature(ctx, src, r.Digest, o.Keys, repo); err != nil {
			return rep, err
		}
		ix, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return rep, refusal.Wrap(refusal.ImageDigestMismatch, err, "%s", ref)
		}
		for _, d := range ix.Manifests {
			list = append(list, todo{d: d.Digest})
		}
	} else {
		list = append(list, todo{d: r.Digest, raw: raw})
	}
	matched := false
	var has []string // the platforms the image holds, for a --platform it does not
	for _, t := range list {
		mr := ManifestReport{Digest: t.d}
		img, m, err := loadImage(ctx, src, t.d, t.raw)
		if err != nil {
			rep.Manifests = append(rep.Manifests, mr)
			return rep, readErr(r, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return rep, refusal.Wrap(refusal.ImageDigestMismatch, err, "%s: config", t.d)
		}
		mr.Labels = cf.Config.Labels
		mr.Platform = mr.Labels[LabelPlatform]
		has = append(has, mr.Platform)
		if o.Platform != "" && mr.Platform != o.Platform {
			continue
		}
		matched = true
		if !o.SkipBlobs {
			for _, l := range m.Layers {
				rc, err := src.blob(ctx, l.Digest, l.Size)
				if err == nil {
					_, err = io.Copy(io.Discard, rc)
					rc.Close()
				}
				if err != nil {
					rep.Manifests = append(rep.Manifests, mr)
					return rep, readErr(r, err)
				}
				mr.BlobsRehashed++
			}
		}
		err = verifyManifest(ctx, src, t.d, o, repo, &mr)
		rep.Manifests = append(rep.Manifests, mr)
		if err != nil {
			return rep, err
		}
	}
	if !matched {
		// It said only what is not there; the platforms that are are
		// the choice.
		return rep, refusal.New(refusal.PlatformUnsupported, "%s has no image for %s: it holds %s; name one of those", ref, o.Platform, strings.Join(has, ", "))
	}
	return rep, nil
}

func readErr(r Ref, err error) error {
	return readFailed(refusal.ImageDigestMismatch, err, "cannot read %s", r)
}

// checkSignature finds the cosign signature of d under a trusted key; it
// returns the signer's key digest and the repository the payload names.
func checkSignature(ctx context.Context, src source, d v1.Hash, keys []*sign.PublicKey, repo string) (string, string, error) {
	layers, err := cosignLayers(ctx, src, SignatureTag(d), SimpleSigningMediaType)
	if err != nil {
		return "", "", err
	}
	if len(layers) == 0 {
		return "", "", refusal.New(refusal.ImageSignatureInvalid, "%s has no signature (no %s): build it again signed with a builder's key, or, copying it, copy its %s and %s tags with it", d, SignatureTag(d), SignatureTag(d), AttestationTag(d))
	}
	var why, todo []string
	advise := func(s string) {
		if !slices.Contains(todo, s) {
			todo = append(todo, s)
		}
	}
	for _, l := range layers {
		sig, err := base64.StdEncoding.DecodeString(l.desc.Annotations[SignatureAnnotation])
		if err != nil {
			why = append(why, "a signature that is not base64")
			advise(signAgain)
			continue
		}
		var signer *sign.PublicKey
		for _, k := range keys {
			if k.Verify(l.body, sig) == nil {
				signer = k
				break
			}
		}
		if signer == nil {
			why = append(why, "a signature under no trusted key")
			advise("trust the public key of the builder that signed it (as a builder key), if it is one, or build it again signed with a trusted builder key")
			continue
		}
		if err := cosignDocKeys(l.body, simpleSigningType, fmt.Sprintf("the signed payload of %s (layer %s, signed by the key %s)", SignatureTag(d), l.desc.Digest, signer.Digest()), "", signedKeysTodo); err != nil {
			return "", "", err
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(l.body, &p); err != nil {
			why = append(why, "a signed payload that is not simple signing")
			advise(signAgain)
			continue
		}
		if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != d.String() {
			why = append(why, fmt.Sprintf("a signed payload for %s", p.Critical.Image.DockerManifestDigest))
			advise(signAgain)
			continue
		}
		if repo != "" && !sameRepo(p.Critical.Identity.DockerReference, repo) {
			why = append(why, fmt.Sprintf("a signature for the repository %s, not %s", p.Critical.Identity.DockerReference, repo))
			advise(fmt.Sprintf("read it from the repository it was signed for, or build it again signed for %s", repo))
			continue
		}
		return signer.Digest().String(), p.Critical.Identity.DockerReference, nil
	}
	return "", "", refusal.New(refusal.ImageSignatureInvalid, "%s: no valid signature under a trusted key: %s (%s)", d, strings.Join(why, "; "), strings.Join(todo, "; or "))
}

// signAgain is what to do about a signature that is not of the image.
const signAgain = "build it again signed with a trusted builder key"

type cosignLayer struct {
	desc v1.Descriptor
	body []byte
}

// cosignLayers reads the layers of media type mt of the cosign image
// tag names, every byte checked against its digest.
func cosignLayers(ctx context.Context, src source, tag string, mt types.MediaType) ([]cosignLayer, error) {
	h, ok, err := src.tag(ctx, tag)
	if err != nil {
		return nil, readFailed(refusal.ImageSignatureInvalid, err, "cannot read %s", tag)
	}
	if !ok {
		return nil, nil
	}
	raw, err := src.manifest(ctx, h)
	if err != nil {
		return nil, readFailed(refusal.ImageSignatureInvalid, err, "cannot read %s", tag)
	}
	if err := cosignDocKeys(raw, manifestDocType, fmt.Sprintf("the manifest %s of %s", h, tag), "", unsignedKeysTodo); err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, refusal.Wrap(refusal.ImageSignatureInvalid, err, "%s", tag)
	}
	if len(m.Layers) > maxCosignLayers {
		return nil, refusal.New(refusal.ImageSignatureInvalid, "%s has %d layers, more than a cosign image may have (%d)", tag, len(m.Layers), maxCosignLayers)
	}
	var out []cosignLayer
	var total int64
	for _, l := range m.Layers {
		if l.MediaType != mt {
			continue
		}
		if l.Size > maxManifest {
			return nil, refusal.New(refusal.ImageSignatureInvalid, "%s: a layer of %d bytes", tag, l.Size)
		}
		// Each layer is kept until every one is checked: the registry
		// decides how many there are, not this host's memory.
		if total += max(l.Size, 0); total > maxCosignBytes {
			return nil, refusal.New(refusal.ImageSignatureInvalid, "%s: its %s layers are more than %d bytes together", tag, mt, maxCosignBytes)
		}
		rc, err := src.blob(ctx, l.Digest, l.Size)
		if err != nil {
			return nil, readFailed(refusal.ImageSignatureInvalid, err, "cannot read %s: layer %s", tag, l.Digest)
		}
		b, err := readAllCapped(rc, maxManifest)
		if err != nil {
			return nil, readFailed(refusal.ImageSignatureInvalid, err, "cannot read %s: layer %s", tag, l.Digest)
		}
		if l.Size < 0 {
			if total += int64(len(b)); total > maxCosignBytes {
				return nil, refusal.New(refusal.ImageSignatureInvalid, "%s: its %s layers are more than %d bytes together", tag, mt, maxCosignBytes)
			}
		}
		out = append(out, cosignLayer{desc: l, body: b})
	}
	return out, nil
}

// maxCosignBytes bounds the signature (or attestation) layers of one
// .sig (.att) image that verify reads and keeps: a cosign image holds one
// small layer per signature or attestation, a few MiB for an SBOM of a
// large env.
const maxCosignBytes = 32 << 20

func verifyManifest(ctx context.Context, src source, d v1.Hash, o VerifyOptions, repo string, mr *ManifestReport) error {
	var err error
	if mr.Signer, mr.SignedRepo, err = checkSignature(ctx, src, d, o.Keys, repo); err != nil {
		return err
	}
	layers, err := cosignLayers(ctx, src, AttestationTag(d), DSSEMediaType)
	if err != nil {
		return err
	}
	// Several builders may have attested the same digest (a rebuild
	// signed by another key adds its attestations to the earlier ones):
	// the provenance taken is the first that agrees with the labels and
	// the expectation; when none does, the first one's differences.
	var provs []*Provenance
	tag := AttestationTag(d)
	for _, l := range layers {
		// Every envelope is decoded (to find its signer), so every one is
		// checked; a statement and its predicate are decoded, and checked,
		// once a trusted key signed them.
		if err := cosignDocKeys(l.body, envelopeType, fmt.Sprintf("the DSSE envelope of %s (layer %s)", tag, l.desc.Digest), "", unsignedKeysTodo); err != nil {
			return err
		}
		body, signer, err := openEnvelope(l.body, o.Keys)
		if err != nil {
			continue
		}
		what := fmt.Sprintf("the in-toto statement of %s (layer %s, signed by the key %s)", tag, l.desc.Digest, signer.Digest())
		if err := cosignDocKeys(body, statementType, what, "", signedKeysTodo); err != nil {
			return err
		}
		var st Statement
		if json.Unmarshal(body, &st) != nil || st.Type != StatementType || !aboutDigest(st.Subject, d) {
			continue
		}
		switch st.PredicateType {
		case SLSAProvenanceType:
			if err := cosignDocKeys(st.Predicate, provenanceType, what, ".predicate", signedKeysTodo); err != nil {
				return err
			}
			var p Provenance
			if json.Unmarshal(st.Predicate, &p) == nil {
				provs = append(provs, &p)
			}
		case CycloneDXType:
			if err := cosignDocKeys(st.Predicate, bomType, what, ".predicate", signedKeysTodo); err != nil {
				return err
			}
			var b BOM
			if json.Unmarshal(st.Predicate, &b) == nil && b.BOMFormat == "CycloneDX" {
				mr.SBOM = true
			}
		}
	}
	if len(provs) == 0 {
		return refusal.New(refusal.ProvenanceMismatch, "%s has no SLSA provenance signed by a trusted key about it", d)
	}
	if !mr.SBOM {
		return refusal.New(refusal.ProvenanceMismatch, "%s has no CycloneDX SBOM signed by a trusted key about it", d)
	}
	var first error
	for _, p := range provs {
		err := checkProvenance(p, mr.Labels, o.Expect)
		if err == nil {
			mr.Provenance = p
			return nil
		}
		if first == nil {
			first = err
		}
	}
	mr.Provenance = provs[0]
	return first
}

func aboutDigest(subjects []Subject, d v1.Hash) bool {
	for _, s := range subjects {
		if s.Digest[d.Algorithm] == d.Hex {
			return true
		}
	}
	return false
}

// checkProvenance compares the provenance with the image's labels and
// with what the accepted pin expects, naming every difference.
func checkProvenance(p *Provenance, labels map[string]string, e Expect) error {
	ext, in := p.BuildDefinition.ExternalParameters, p.BuildDefinition.InternalParameters
	var diffs []string
	cmp := func(what, got, want string) {
		if want != "" && got != want {
			diffs = append(diffs, fmt.Sprintf("%s %s, expected %s", what, got, want))
		}
	}
	cmp("package", ext.Package.SHA256.String(), labels[LabelPackage])
	cmp("resolution", in.Resolution, labels[LabelResolution])
	cmp("base", in.BaseDigest, labels[LabelBaseDigest])
	if !e.PackageSHA256.IsZero() {
		cmp("package", ext.Package.SHA256.String(), e.PackageSHA256.String())
	}
	if !e.Resolution.IsZero() {
		cmp("resolution", in.Resolution, e.Resolution.String())
	}
	cmp("base", in.BaseDigest, e.BaseDigest)
	cmp("builder", p.RunDetails.Builder.ID, e.BuilderID)
	if len(diffs) > 0 {
		return refusal.New(refusal.ProvenanceMismatch, "the provenance names %v", diffs)
	}
	return nil
}

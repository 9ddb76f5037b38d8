// Package container is `verify --backend container` (DESIGN §9): the
// accepted pin (verify.CheckPin, the part every backend shares), then its
// container materialization held to the image itself — the digest, a
// signature under a trusted builder key, and the signed provenance naming
// the accepted artifact — through image.Verify. It also makes the
// materialization `install --backend container` proposes.
//
// It is apart from package verify because it reaches the image code
// (go-containerregistry): an executor that runs local envs imports
// verify alone. It never writes, prints, or runs a container.
package container

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/verify"
)

// Report is a verified pin and the image its container
// materialization names.
type Report struct {
	Provider   string               `json:"provider"`
	Revision   int64                `json:"revision"`
	Entrypoint *registry.Entrypoint `json:"entrypoint,omitempty"`
	// Materialization is the pinned container materialization.
	Materialization registry.Materialization `json:"materialization"`
	// Image is image.Verify's report (signer, provenance, blobs rehashed).
	Image *image.Report      `json:"image"`
	Pin   *registry.Pin      `json:"-"`
	Spec  *registry.Provider `json:"-"`
	// ValidUntil is when the pin stops verifying by time alone (zero
	// when it does not), as verify.Report's: a container executor that
	// does not verify before every call checks it (Unexpired).
	ValidUntil time.Time `json:"-"`
}

// Runtime is the version of the runtime (cruxible-provider-runtime) in
// the pinned image, as its verified provenance's resolved dependencies
// name it ("" when r holds no verified image, or it names none): what
// picks the harness's argv (invoke.Call.Runtime).
func (r *Report) Runtime() string {
	if r == nil || r.Image == nil {
		return ""
	}
	for _, m := range r.Image.Manifests {
		if m.Provenance != nil && strings.HasSuffix(r.Materialization.Image, "@"+m.Digest.String()) {
			return m.Provenance.Runtime()
		}
	}
	return ""
}

// Unexpired refuses pin_expired once the pin verified in r is past its
// ValidUntil at now (verify.Report.Unexpired).
func (r *Report) Unexpired(now time.Time) error {
	if r == nil {
		return nil
	}
	return (&verify.Report{Provider: r.Provider, Revision: r.Revision, ValidUntil: r.ValidUntil, Pin: r.Pin}).Unexpired(now)
}

// Options tune Verify beyond verify.Options.
type Options struct {
	// ImageOptions are passed to image.Verify (Remote for a registry's
	// transport); its Keys, Platform and Expect are set here.
	Image image.VerifyOptions
}

// BuilderKeys are the registry's trusted keys of role builder, the only
// ones an image's signature and provenance count under (DESIGN §8).
func BuilderKeys(ctx context.Context, reg registry.Reader) ([]*sign.PublicKey, error) {
	tr, err := reg.Trust(ctx)
	if err != nil {
		return nil, err
	}
	var keys []*sign.PublicKey
	if tr != nil {
		for _, k := range tr.Keys {
			if k.Role != registry.RoleBuilder {
				continue
			}
			pk, err := sign.ParsePublicKey([]byte(k.PEM))
			if err != nil {
				return nil, refusal.Wrap(refusal.RegistryCorrupt, err, "trusted builder key %s", k.Name)
			}
			keys = append(keys, pk)
		}
	}
	if len(keys) == 0 {
		// One proposed already wants its approvals, not another proposal.
		if id, name := proposedBuilderKey(ctx, reg); id != "" {
			return nil, refusal.New(refusal.ImageSignatureInvalid, "the registry trusts no builder key yet: the change-set %s that trusts %s is proposed, not approved; approve it with an approver key", id, name).WithRemedy(refusal.ActionApprove, id)
		}
		// A registry that trusts no key at all takes an approver's first
		// (its root of trust): "key trust PUB --role builder", the advice
		// it gave, was refused changeset_invalid there.
		if tr == nil || len(tr.Keys) == 0 {
			return nil, refusal.New(refusal.ImageSignatureInvalid, "the registry trusts no key yet, so no builder key: trust an approver's key first (an operator's, the root of trust), then the CI's key as a builder, a change-set that approver approves").WithRemedy(refusal.ActionTrustKey, registry.RoleApprover)
		}
		return nil, refusal.New(refusal.ImageSignatureInvalid, "the registry trusts no builder key: trust the CI's key, as a builder").WithRemedy(refusal.ActionTrustKey, registry.RoleBuilder)
	}
	return keys, nil
}

// proposedBuilderKey is the id and key name of a proposed change-set that
// would trust a builder key, or "" (none, or the change-sets unreadable:
// the refusal then says what it said before).
func proposedBuilderKey(ctx context.Context, reg registry.Reader) (id, name string) {
	css, err := reg.ChangeSets(ctx)
	if err != nil {
		return "", ""
	}
	for _, cs := range css {
		if cs.Status.State != registry.StateProposed || len(cs.Spec.Changes) != 1 {
			continue
		}
		if ch := cs.Spec.Changes[0]; ch.Action == registry.ActionTrustKey && ch.Key != nil && ch.Key.Role == registry.RoleBuilder {
			return cs.Metadata.ID.String(), ch.Key.Name
		}
	}
	return "", ""
}

// Verify checks the accepted pin of provider name as Verify does
// (pin, entrypoint, protocol), then its container materialization for
// o.Platform ("" : the only one): its image reference is pinned by the
// materialization's digest (image_digest_mismatch), and image.Verify
// holds the image to it: every manifest, config and (with o.Deep) layer
// rehashed (image_digest_mismatch), a cosign signature naming that
// digest and repository under a trusted builder key of the registry
// (image_signature_invalid), and a signed SLSA provenance that names the
// pinned package sha256, resolution digest, base image digest and
// builder id (provenance_mismatch). The report is filled in as far as
// verification got.
func Verify(ctx context.Context, reg registry.Reader, name string, o verify.Options, co Options) (*Report, error) {
	r := &Report{Provider: name}
	acc, err := verify.CheckPin(ctx, reg, name, o)
	if acc != nil {
		r.Pin, r.Spec, r.Revision, r.Entrypoint, r.ValidUntil = acc.Pin, acc.Spec, acc.Pin.Revision, acc.Entrypoint, acc.ValidUntil
	}
	if err != nil {
		return r, err
	}
	spec := acc.Spec
	var found []registry.Materialization
	for _, m := range spec.Materializations {
		if m.Backend == registry.BackendContainer && (o.Platform == "" || m.Platform == o.Platform) {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return r, verify.Unpinned(spec, name, registry.BackendContainer, o.Platform, len(found))
	}
	m := found[0]
	r.Materialization = m
	ref, err := image.ParseRef(m.Image)
	if err != nil {
		return r, refusal.Wrap(refusal.ImageDigestMismatch, err, "the pinned image %q", m.Image)
	}
	if ref.Digest.String() != m.Digest.String() {
		return r, refusal.New(refusal.ImageDigestMismatch, "the pinned image %s is not the pinned digest %s", m.Image, m.Digest)
	}
	keys, err := BuilderKeys(ctx, reg)
	if err != nil {
		return r, err
	}
	vo := co.Image
	vo.Keys = keys
	vo.Platform = ""
	vo.SkipBlobs = !o.Deep
	vo.Expect = image.Expect{BaseDigest: m.Base, BuilderID: m.Builder, Resolution: m.Resolution}
	if spec.Package != nil {
		vo.Expect.PackageSHA256 = spec.Package.SHA256
	}
	if m.Resolution.IsZero() || m.Base == "" || m.Builder == "" || vo.Expect.PackageSHA256.IsZero() {
		e := refusal.New(refusal.ProvenanceMismatch, "the pinned container materialization of %s names no resolution, base or builder to hold its provenance to: propose it again with its image (REF@DIGEST), whose provenance names them", name).WithRemedy(refusal.ActionPropose, spec.ProposeTarget(name)).WithImages(spec.Images()).WithProposePlatforms(spec.ProposePlatforms()).WithProposeNoBytecode(spec.ProposeNoBytecode())
		return r, spec.WithProposeChoices(e, nil, "")
	}
	rep, err := image.Verify(ctx, m.Image, vo)
	r.Image = rep
	if err != nil {
		return r, layoutGone(err, name, spec, ref)
	}
	if len(rep.Manifests) != 1 || rep.Manifests[0].Platform != m.Platform {
		return r, refusal.New(refusal.ImageDigestMismatch, "%s is not one image of platform %s", m.Image, m.Platform)
	}
	return r, nil
}

// layoutGone turns image.Verify's fetch_failed of a pinned layout that
// is not there (its directory gone, or without its oci-layout file) into
// the refusal that says what to do about a pin's: put the layout back
// (ActionRestoreLayout), or propose the provider again with an image that
// is there (ActionPropose, its other images kept and the new one named by
// the operator). It said "check the path", which the pin, not the
// operator, chose. Any other error is returned as it is.
func layoutGone(err error, name string, spec *registry.Provider, ref image.Ref) error {
	var re *refusal.Error
	if ref.Layout == "" || !errors.As(err, &re) || re.Code != refusal.FetchFailed {
		return err
	}
	what := "its directory is gone"
	if _, serr := os.Lstat(ref.Layout); serr == nil {
		if _, serr := os.Lstat(filepath.Join(ref.Layout, "oci-layout")); !errors.Is(serr, fs.ErrNotExist) {
			return err // a layout, unreadable: its own refusal says why
		}
		what = "the directory holds no oci-layout file"
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return err
	}
	var others []string
	for _, img := range spec.Images() {
		if r, perr := image.ParseRef(img); perr != nil || r.Layout != ref.Layout {
			others = append(others, img)
		}
	}
	plats, python := spec.ProposePlatforms()
	e := refusal.Wrap(refusal.FetchFailed, re.Err, "the image the accepted pin of %s names, %s, is not there: no OCI image layout at %s (%s); put the layout back there, copied whole from where it was built (or written there again from the registry it was pushed to, with its signature and attestation tags), or propose the provider again with an image that is there, and approve it", name, ref, ref.Layout, what).
		WithRemedy(refusal.ActionRestoreLayout, ref.Layout)
	// The pin's envs beside its images, made without bytecode, are
	// proposed so again (NoBytecode): the install without --no-compile
	// proposed other envs.
	// Where the pin's envs point at several interpreters, the proposal
	// with each, each env's named in the detail (WithProposeChoices).
	propose := &refusal.Error{Remedy: &refusal.Remedy{Action: refusal.ActionPropose, Target: spec.ProposeTarget(name), Images: others, Backend: registry.BackendContainer, Platforms: plats, Python: python, NoBytecode: spec.ProposeNoBytecode()}}
	spec.WithProposeChoices(propose, nil, "")
	e.Remedy.Or, e.Detail = propose.Remedy, e.Detail+propose.Detail
	return e
}

// Materialization is what `install --backend container --image
// REF@DIGEST` proposes for an image: it verifies the image under the
// registry's builder keys with its provenance held to the package
// sha256 (and resolution, when known), and returns the container
// materialization naming its digest, platform, resolution, base and
// builder as the signed provenance states them. The image must be one
// platform's manifest; Materializations takes an index too.
func Materialization(ctx context.Context, reg registry.Reader, ref string, pkg, resolution digest.Digest, vo image.VerifyOptions) (registry.Materialization, *image.Report, error) {
	ms, rep, err := Materializations(ctx, reg, ref, pkg, resolution, vo)
	if err != nil {
		return registry.Materialization{}, rep, err
	}
	if rep.Index {
		return registry.Materialization{}, rep, refusal.New(refusal.ImageDigestMismatch, "%s is an image index: name one platform's manifest digest", ref)
	}
	return ms[0], rep, nil
}

// Materializations is Materialization for a reference to one image or to
// a multi-platform image index. An index is verified whole (its own
// signature, and every platform manifest's signature, provenance and
// SBOM) and gives one materialization per platform, each pinned by that
// platform's manifest digest (REF@<manifest digest>): an executor pulls
// and runs one platform's image, and the pin names exactly that one.
func Materializations(ctx context.Context, reg registry.Reader, ref string, pkg, resolution digest.Digest, vo image.VerifyOptions) ([]registry.Materialization, *image.Report, error) {
	keys, err := BuilderKeys(ctx, reg)
	if err != nil {
		return nil, nil, err
	}
	vo.Keys = keys
	vo.Expect = image.Expect{PackageSHA256: pkg, Resolution: resolution}
	rep, err := image.Verify(ctx, ref, vo)
	if err != nil {
		return nil, rep, otherRole(ctx, reg, ref, vo, err)
	}
	at := strings.LastIndex(ref, "@")
	if len(rep.Manifests) == 0 || at < 0 {
		return nil, rep, refusal.New(refusal.ImageDigestMismatch, "%s holds no platform image", ref)
	}
	var out []registry.Materialization
	for _, mr := range rep.Manifests {
		if mr.Provenance == nil {
			return nil, rep, refusal.New(refusal.ProvenanceMismatch, "%s: the manifest %s has no provenance", ref, mr.Digest)
		}
		p := mr.Provenance
		res, err := digest.Parse(p.BuildDefinition.InternalParameters.Resolution)
		if err != nil {
			return nil, rep, refusal.Wrap(refusal.ProvenanceMismatch, err, "%s: the provenance's resolution", ref)
		}
		d, err := digest.Parse(mr.Digest.String())
		if err != nil {
			return nil, rep, refusal.Wrap(refusal.ImageDigestMismatch, err, "%s", ref)
		}
		out = append(out, registry.Materialization{
			Backend: registry.BackendContainer, Platform: mr.Platform, Digest: d, Image: ref[:at] + "@" + mr.Digest.String(), Resolution: res,
			Base: p.BuildDefinition.InternalParameters.BaseDigest, Builder: p.RunDetails.Builder.ID,
		})
	}
	return out, rep, nil
}

// otherRole explains an image_signature_invalid refusal of an image that
// a trusted key of another role than builder signed (a CI that signed
// with an approver's key): "no valid signature under a trusted key" told
// an operator who trusts that key nothing. Any other error is returned
// as it is.
func otherRole(ctx context.Context, reg registry.Reader, ref string, vo image.VerifyOptions, err error) error {
	if refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
		return err
	}
	tr, terr := reg.Trust(ctx)
	if terr != nil || tr == nil {
		return err
	}
	for _, k := range tr.Keys {
		if k.Role == registry.RoleBuilder {
			continue
		}
		pk, perr := sign.ParsePublicKey([]byte(k.PEM))
		if perr != nil {
			continue
		}
		o := vo
		o.Keys, o.SkipBlobs = []*sign.PublicKey{pk}, true
		if _, verr := image.Verify(ctx, ref, o); refusal.CodeOf(verr) != refusal.ImageSignatureInvalid {
			return refusal.New(refusal.ImageSignatureInvalid, "%s is signed by %s, a key this registry trusts as %s, under no builder key: only builder keys sign images; sign it with the CI's builder key (a key trusted with the role builder)", ref, k.Name, k.Role).WithRemedy(refusal.ActionTrustKey, registry.RoleBuilder)
		}
	}
	return err
}

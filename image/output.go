package image

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/sign"
)

// tagged is a signature or attestation image and the tag cosign gives it.
type tagged struct {
	tag string
	img v1.Image
}

// signAll signs every platform image (a simple-signing signature, and
// the provenance and SBOM statements in DSSE envelopes) and, for an
// index, the index too.
func signAll(k *sign.PrivateKey, repo string, res *Result) ([]tagged, error) {
	var out []tagged
	sigFor := func(d v1.Hash) error {
		body, err := simpleSigning(repo, d)
		if err != nil {
			return err
		}
		sig, err := k.Sign(body)
		if err != nil {
			return err
		}
		img, err := sigImage(body, sig)
		if err != nil {
			return err
		}
		out = append(out, tagged{SignatureTag(d), img})
		return nil
	}
	for _, p := range res.Platforms {
		if err := sigFor(p.Digest); err != nil {
			return nil, err
		}
		var envs [][]byte
		for _, a := range []struct {
			typ  string
			pred []byte
		}{{SLSAProvenanceType, p.prov}, {CycloneDXType, p.sbom}} {
			st, err := statement(repo, p.Digest, a.typ, rawJSON(a.pred))
			if err != nil {
				return nil, err
			}
			e, err := envelope(k, st)
			if err != nil {
				return nil, err
			}
			envs = append(envs, e)
		}
		img, err := attImage(envs, []string{SLSAProvenanceType, CycloneDXType})
		if err != nil {
			return nil, err
		}
		out = append(out, tagged{AttestationTag(p.Digest), img})
	}
	if len(res.Platforms) > 1 {
		if err := sigFor(res.Digest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// writeLayout writes top (an image or an index) and the cosign images
// into the layout dir, each index.json entry replaced rather than
// duplicated: the image by digest, a signature or attestation by its tag
// (org.opencontainers.image.ref.name); the image's own ref name is
// refName (its tag: skopeo and umoci address it as oci:DIR:refName), and an
// older image under that name is replaced.
func writeLayout(dir string, top any, d v1.Hash, refName string, extra []tagged) error {
	p, err := layout.FromPath(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		p, err = layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	}
	if err != nil {
		return err
	}
	same := func(desc v1.Descriptor) bool {
		return desc.Digest == d || desc.Annotations[refNameAnnotation] == refName
	}
	ann := layout.WithAnnotations(map[string]string{refNameAnnotation: refName})
	switch t := top.(type) {
	case v1.ImageIndex:
		err = p.ReplaceIndex(t, same, ann)
	case v1.Image:
		err = p.ReplaceImage(t, same, ann)
	}
	if err != nil {
		return err
	}
	for _, x := range extra {
		if err := p.ReplaceImage(x.img, match.Annotation(refNameAnnotation, x.tag), layout.WithAnnotations(map[string]string{refNameAnnotation: x.tag})); err != nil {
			return err
		}
	}
	// go-containerregistry writes blobs 0600 (a temp file renamed): an
	// image is no secret, and whoever runs it (podman as another user)
	// must read it. Blobs owned by someone else are left as they are.
	blobs := filepath.Join(dir, "blobs", "sha256")
	ents, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			_ = os.Chmod(filepath.Join(blobs, e.Name()), 0o644)
		}
	}
	return nil
}

// pushAll pushes top by digest (and under tag unless it is "") and the
// cosign images under their tags.
func pushAll(ctx context.Context, repo name.Repository, tag string, top any, d v1.Hash, extra []tagged, opts []remote.Option) error {
	opts = append(append([]remote.Option(nil), opts...), remote.WithContext(ctx))
	refs := []name.Reference{repo.Digest(d.String())}
	if tag != "" {
		refs = append(refs, repo.Tag(tag))
	}
	for _, r := range refs {
		var err error
		switch x := top.(type) {
		case v1.ImageIndex:
			err = remote.WriteIndex(r, x, opts...)
		case v1.Image:
			err = remote.Write(r, x, opts...)
		}
		if err != nil {
			return err
		}
	}
	for _, e := range extra {
		if err := remote.Write(repo.Tag(e.tag), e.img, opts...); err != nil {
			return err
		}
	}
	return nil
}

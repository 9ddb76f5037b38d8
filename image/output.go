package image

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"

	"github.com/cruxible/cruxprov/refusal"
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
// into the layout dir (created when missing) with a layoutWriter, each
// index.json entry replaced rather than duplicated: by its tag
// (org.opencontainers.image.ref.name), and the image's entry without one
// by its digest; the image's own ref name is refName (its tag: skopeo and
// umoci address it as oci:DIR:refName), and an older image under that
// name is replaced. The same image under another tag stays, as a
// registry keeps it: it was dropped by its digest, so building a release
// as 1.0, then as latest (one digest: the build is reproducible), left
// the layout without its 1.0.
// Blobs are 0644: an image is no secret, and whoever runs it (podman as
// another user) must read it. The whole write holds the layout's lock
// (lockLayout), waiting for another writer of it (waiting is called once
// if it has to wait).
func writeLayout(ctx context.Context, dir string, top any, d v1.Hash, refName string, extra []tagged, waiting func(string)) (err error) {
	unlock, made, err := lockLayout(ctx, dir, waiting)
	if err != nil {
		return err
	}
	defer unlock()
	// A layout this write makes goes again when the write fails (an
	// interruption, say), before the lock is let go: no directory that is
	// not a layout is left.
	if made {
		defer func() {
			if err != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	w, err := newLayoutWriter(ctx, dir)
	if err != nil {
		return err
	}
	var desc v1.Descriptor
	switch t := top.(type) {
	case v1.ImageIndex:
		desc, err = w.index(t)
	case v1.Image:
		desc, err = w.image(t)
	default:
		err = fmt.Errorf("cannot write a %T", top)
	}
	if err != nil {
		return err
	}
	if desc.Digest != d {
		return fmt.Errorf("wrote %s, expected %s", desc.Digest, d)
	}
	desc.Annotations = map[string]string{refNameAnnotation: refName}
	adds := []v1.Descriptor{desc}
	names := map[string]bool{refName: true}
	for _, x := range extra {
		xd, err := w.image(x.img)
		if err != nil {
			return err
		}
		xd.Annotations = map[string]string{refNameAnnotation: x.tag}
		adds = append(adds, xd)
		names[x.tag] = true
	}
	return w.commit(func(e v1.Descriptor) bool {
		name, tagged := e.Annotations[refNameAnnotation]
		return names[name] || (!tagged && e.Digest == d)
	}, adds)
}

// pushAll pushes top by digest, then the cosign images under their tags
// (added to those already there, mergeCosign), checks that they stay
// there (keepCosign), and moves tag (unless it is "") last: a tag never
// names an image whose signature and attestations are not in the
// registry yet, so a push that fails or is interrupted leaves the tag
// where it was (an image pushed by digest alone is named by nothing a
// consumer pulls).
func pushAll(ctx context.Context, repo name.Repository, tag string, top any, d v1.Hash, extra []tagged, pub *sign.PublicKey, opts []remote.Option) error {
	opts = append(append([]remote.Option(nil), opts...), remote.WithContext(ctx))
	write := func(r name.Reference) error {
		return againOnBlobRace(ctx, func() error {
			switch x := top.(type) {
			case v1.ImageIndex:
				return remote.WriteIndex(r, x, opts...)
			case v1.Image:
				return remote.Write(r, x, opts...)
			}
			return fmt.Errorf("cannot push a %T", top)
		})
	}
	if err := write(repo.Digest(d.String())); err != nil {
		return err
	}
	if len(extra) > 0 {
		if err := keepCosign(ctx, repo, d, extra, pub, opts); err != nil {
			return err
		}
	}
	if tag != "" {
		if err := write(repo.Tag(tag)); err != nil {
			return err
		}
	}
	return nil
}

// keepCosign adds the cosign images extra to their tags, then reads the
// tags again until they hold what it added and every layer it saw there
// before, adding back what is missing.
//
// A registry has no compare-and-swap for a tag: another builder pushing
// the same digest under its own key that read a .sig or .att tag before
// this push wrote it, and wrote its merge after, dropped what this push
// added, and the build still said it was signed (one round in two with
// two keys at once; with six at once on a loaded host, eight rounds in
// ten). The tags were read again at once after the push, and the other
// push's merge, which takes the time of a read and a write, still
// landed after that read. So the tags are read again only after a pause longer than
// that: a few times the longest read and write of this push's own
// (which grows with the load of the host and the registry), with a
// random part so that pushes that meet do not meet again, and longer
// after every round that had something to add back. A push that read
// before this one wrote and writes later than that drops it still; the
// pushes that are still checking add back each layer they saw, another
// key's too. After cosignRounds rounds that each had something to add,
// the push is refused (cosignLostError): run again, it adds what is
// missing and moves the tag.
func keepCosign(ctx context.Context, repo name.Repository, d v1.Hash, extra []tagged, pub *sign.PublicKey, opts []remote.Option) error {
	seen := make([]cosignSeen, len(extra))
	var longest time.Duration
	// add adds extra[i]'s layers and those seen under its tag before
	// that are missing there now, reporting whether any were.
	add := func(i int) (added bool, err error) {
		e := extra[i]
		err = againOnBlobRace(ctx, func() error {
			start := time.Now()
			defer func() { longest = max(longest, time.Since(start)) }()
			img, err := mergeCosign(repo.Tag(e.tag), e.img, pub, &seen[i], opts)
			if err != nil || img == nil {
				return err
			}
			added = true
			return remote.Write(repo.Tag(e.tag), img, opts...)
		})
		return added, err
	}
	for i := range extra {
		if _, err := add(i); err != nil {
			return err
		}
	}
	for round := 0; round < cosignRounds; round++ {
		pause := max(cosignSettleMin, cosignSettleFactor*longest)
		for range round {
			pause += pause / 2
		}
		pause = min(pause, cosignSettleMax)
		pause += rand.N(pause)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		lost := false
		for i := range extra {
			added, err := add(i)
			if err != nil {
				return err
			}
			lost = lost || added
		}
		if !lost {
			return nil
		}
	}
	return &cosignLostError{Digest: d, Rounds: cosignRounds}
}

// The bounds of keepCosign: how often it reads the tags again and adds
// back what is missing before it gives up, and its pause before each
// read: cosignSettleFactor times the longest read and write of the push,
// at least cosignSettleMin, half as long again after each round that had
// something to add back, at most cosignSettleMax, and a random part up
// to as much again.
const (
	cosignRounds       = 6
	cosignSettleFactor = 3
	cosignSettleMin    = 200 * time.Millisecond
	cosignSettleMax    = 5 * time.Second
)

// cosignLostError is keepCosign's failure: what the push added to the
// cosign tags of Digest was dropped by other pushes of the same digest
// in each of Rounds rounds.
type cosignLostError struct {
	Digest v1.Hash
	Rounds int
}

func (e *cosignLostError) Error() string {
	return fmt.Sprintf("the signature or attestations of %s under this key were dropped by other pushes of the same digest, writing the .sig and .att tags at the same time, in %d rounds in a row (a registry has no compare-and-swap for a tag)", e.Digest, e.Rounds)
}

// cosignSeen is what keepCosign saw under one cosign tag: each layer
// once, in the order first seen.
type cosignSeen struct {
	keys   map[cosignKey]bool
	layers []seenLayer
}

// cosignKey names a layer of a cosign image: its media type, digest, and
// signature annotation (the simple-signing layers of one digest and
// repository are one blob; their signatures are in the annotation).
type cosignKey struct {
	mediaType string
	digest    v1.Hash
	sig       string
}

type seenLayer struct {
	key cosignKey
	add mutate.Addendum
}

func keyOf(l v1.Descriptor) cosignKey {
	return cosignKey{string(l.MediaType), l.Digest, l.Annotations[SignatureAnnotation]}
}

// see records the layers of old (its manifest om) not seen before.
func (s *cosignSeen) see(old v1.Image, om *v1.Manifest) error {
	if s.keys == nil {
		s.keys = map[cosignKey]bool{}
	}
	for _, l := range om.Layers {
		k := keyOf(l)
		if s.keys[k] {
			continue
		}
		ol, err := old.LayerByDigest(l.Digest)
		if err != nil {
			return err
		}
		s.keys[k] = true
		s.layers = append(s.layers, seenLayer{k, mutate.Addendum{Layer: ol, MediaType: l.MediaType, Annotations: l.Annotations}})
	}
	return nil
}

// blobRaceAttempts bounds againOnBlobRace.
const blobRaceAttempts = 4

// againOnBlobRace runs write again (it checks which blobs the registry
// holds, uploads the missing ones and puts the manifest) when the
// registry answers that a manifest names a blob it does not hold, or a
// blob whose digest it cannot read back. Two builds pushing the same
// content at once (two CI jobs of one commit) meet this in Debian's
// docker-registry: a manifest checked while the other push links the
// same blob is answered DIGEST_INVALID and MANIFEST_BLOB_UNKNOWN, and a
// moment later the blob is there.
func againOnBlobRace(ctx context.Context, write func() error) error {
	var err error
	for i := 0; i < blobRaceAttempts; i++ {
		if err = write(); err == nil || !blobRace(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 100 * time.Millisecond):
		}
	}
	return err
}

// blobRace reports whether err is a registry's answer that a manifest's
// blob is unknown or unreadable.
func blobRace(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestBlobUnknownErrorCode, transport.BlobUnknownErrorCode, transport.DigestInvalidErrorCode:
			return true
		}
	}
	return false
}

// mergeCosign is what to push under the cosign tag t: img's layers (its
// signature, or its attestations) added to those of the image already
// there, as cosign adds a signature, so that a rebuild of the same digest
// signed by another builder key (a rotated key, a second runner) leaves
// the signatures executors already check in place. A layer pub already
// signed there with the same payload is not added again (signatures are
// randomized: a rerun would add one each time); nil when nothing is new.
// The layers seen records under the tag before (another key's too) and
// missing there now are added back, and those there now are recorded.
func mergeCosign(t name.Tag, img v1.Image, pub *sign.PublicKey, seen *cosignSeen, opts []remote.Option) (v1.Image, error) {
	desc, err := remote.Get(t, opts...)
	if notThere(err) {
		return withSeen(img, seen)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s to add to it: %w", t, err)
	}
	if !desc.MediaType.IsImage() {
		return withSeen(img, seen) // no cosign image: nothing under the tag to keep
	}
	old, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s to add to it: %w", t, err)
	}
	om, err := old.Manifest()
	if err != nil {
		return nil, err
	}
	// The new signature is added to the old image's config and layers,
	// which go-containerregistry reads whole: a registry is not trusted
	// with this host's memory (a config that claims gigabytes, or no
	// size, and never ends). A cosign image's config is a few hundred
	// bytes, its layers a handful.
	if om.Config.Size < 0 || om.Config.Size > maxManifest || len(om.Layers) > maxCosignLayers {
		return nil, refusal.New(refusal.FetchFailed, "%s in the registry is no cosign image (a config of %d bytes, %d layers; at most %d and %d): remove the tag, or check the registry", t, om.Config.Size, len(om.Layers), maxManifest, maxCosignLayers)
	}
	nm, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if err := seen.see(old, om); err != nil {
		return nil, fmt.Errorf("cannot read %s to add to it: %w", t, err)
	}
	// What pub signed in the old image: simple-signing payload digests,
	// and DSSE statements.
	signed := map[string]bool{}
	for _, l := range om.Layers {
		switch l.MediaType {
		case SimpleSigningMediaType:
			// The payload's digest is its name; its signature is checked
			// below against the new layer's body, which has that digest.
		case DSSEMediaType:
			if l.Size > maxManifest {
				continue
			}
			ol, err := old.LayerByDigest(l.Digest)
			if err != nil {
				return nil, err
			}
			rc, err := ol.Compressed()
			if err != nil {
				return nil, fmt.Errorf("cannot read %s: %w", t, err)
			}
			b, err := readAllCapped(verifyReader(rc, l.Digest, l.Size), maxManifest)
			if err != nil {
				return nil, fmt.Errorf("cannot read %s: %w", t, err)
			}
			if body, _, err := openEnvelope(b, []*sign.PublicKey{pub}); err == nil {
				signed[string(body)] = true
			}
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var adds []mutate.Addendum
	there := layerKeys(om.Layers)
	for i, l := range layers {
		desc := nm.Layers[i]
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		b, err := readAllCapped(rc, maxManifest)
		if err != nil {
			return nil, err
		}
		dup := false
		switch desc.MediaType {
		case SimpleSigningMediaType:
			for _, ol := range om.Layers {
				if ol.MediaType != desc.MediaType || ol.Digest != desc.Digest {
					continue
				}
				if sig, err := base64.StdEncoding.DecodeString(ol.Annotations[SignatureAnnotation]); err == nil && pub.Verify(b, sig) == nil {
					dup = true
				}
			}
		case DSSEMediaType:
			if body, _, err := openEnvelope(b, []*sign.PublicKey{pub}); err == nil && signed[string(body)] {
				dup = true
			}
		}
		if !dup {
			adds = append(adds, mutate.Addendum{Layer: static.NewLayer(b, desc.MediaType), Annotations: desc.Annotations})
			there[keyOf(desc)] = true
		}
	}
	adds = append(adds, seen.missing(there)...)
	if len(adds) == 0 {
		return nil, nil
	}
	return mutate.Append(old, adds...)
}

// withSeen is img with the layers seen records added, for a tag that
// holds no cosign image now.
func withSeen(img v1.Image, seen *cosignSeen) (v1.Image, error) {
	nm, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if adds := seen.missing(layerKeys(nm.Layers)); len(adds) > 0 {
		return mutate.Append(img, adds...)
	}
	return img, nil
}

// layerKeys is the set of the layers' keys.
func layerKeys(layers []v1.Descriptor) map[cosignKey]bool {
	keys := make(map[cosignKey]bool, len(layers))
	for _, l := range layers {
		keys[keyOf(l)] = true
	}
	return keys
}

// missing is the layers seen records that there does not hold.
func (s *cosignSeen) missing(there map[cosignKey]bool) []mutate.Addendum {
	var adds []mutate.Addendum
	for _, l := range s.layers {
		if !there[l.key] {
			adds = append(adds, l.add)
		}
	}
	return adds
}

// maxCosignLayers bounds the layers of a .sig or .att image a push adds
// to: one per signature or attestation made of the digest.
const maxCosignLayers = 1024

// notThere reports whether err is a registry's answer that a tag (or the
// repository) does not exist.
func notThere(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == 404 {
		return true
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return true
		}
	}
	return false
}

// pushFailed types a push to repo that failed with err. The registry
// not taking the push — not reached, the connection dropped half-way,
// credentials refused, a registry that takes no pushes (read-only), its
// own failure (any HTTP status) — is push_failed (it was fetch_failed, a
// fetch's code, which gave one code two meanings), as is a signature or
// attestations that other pushes of the same digest kept dropping from
// the .sig or .att tag (cosignLostError), and its detail says
// to which registry and repository, and what to do about it: go-containerregistry's error does
// not say it ("unexpected status code 401 Unauthorized (HEAD responses
// have no body, use GET for details)"). A fetch_failed refusal of the
// push's own (a .sig or .att tag that holds no cosign image) is the
// push's too, push_failed; any other refusal (a base blob that does not hash
// to its name, read as it is pushed) stays what it is; anything else (a
// file of this host that could not be read) is returned as it is.
// Whatever a failed push left in the registry is named by no tag it
// moved, and does not verify: its signature or attestations are missing.
func pushFailed(repo name.Repository, err error) error {
	const again = "; run the build again (a failed push does not move the image's tag)"
	at := fmt.Sprintf("the push to the registry %s failed: cannot push to %s", repo.RegistryStr(), repo)
	err = quietHead(err)
	var (
		te *transport.Error
		re *refusal.Error
		le *cosignLostError
	)
	switch {
	case errors.As(err, &le):
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v; push again: run the build again once the other pushes of this digest are done, it adds back what is missing and then moves the tag (a failed push does not move the image's tag)", at, err)
	case refusal.CodeOf(err) == refusal.FetchFailed && errors.As(err, &re):
		return &refusal.Error{Code: refusal.PushFailed, Detail: at + ": " + re.Detail, Err: re.Err, Remedy: re.Remedy}
	case refusal.CodeOf(err) != "":
		return err
	case CertUntrusted(err):
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v%s%s", at, err, certAdvice, again)
	case credentialsRefused(err):
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v%s%s", at, err, credentialsAdvice(repo.RegistryStr()), again)
	case errors.As(err, &te) && takesNoPush(te):
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v (the registry takes no pushes, HTTP %d: it is read-only, in maintenance, or a pull-only mirror or cache; push to a registry that takes them, or have its operator allow pushes to it, and run the build again; a failed push does not move the image's tag)", at, err, te.StatusCode)
	case errors.As(err, &te):
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v (the registry failed or refused the push, HTTP %d: check its log and that the repository may be pushed to)%s", at, err, te.StatusCode, again)
	case netFailure(err): // not a layout's missing file: the base's layers are read as they are pushed
		return refusal.Wrap(refusal.PushFailed, err, "%s: %v%s%s", at, err, notReachedAdvice(err, true), again)
	}
	return fmt.Errorf("cannot push to %s: %w", repo, err)
}

// takesNoPush reports whether te is a registry's answer that it takes no
// writes: 405 Method Not Allowed (Debian's docker-registry in read-only
// maintenance mode answers every upload so), or the distribution
// spec's UNSUPPORTED.
func takesNoPush(te *transport.Error) bool {
	if te.StatusCode == http.StatusMethodNotAllowed {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.UnsupportedErrorCode {
			return true
		}
	}
	return false
}

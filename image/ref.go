package image

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/refusal"
)

// LayoutPrefix marks a reference to an OCI image layout directory.
const LayoutPrefix = "oci:"

// Ref is an image reference pinned by digest: in an OCI layout
// ("oci:DIR@sha256:…") or in a registry ("REPO[:TAG]@sha256:…").
type Ref struct {
	// Layout is the layout directory, "" for a registry.
	Layout string
	// Repo is the registry repository, nil for a layout.
	Repo *name.Repository
	// Digest is the pinned manifest (or index) digest.
	Digest v1.Hash
}

// String is the reference as ParseRef reads it.
func (r Ref) String() string {
	if r.Repo == nil {
		return LayoutPrefix + r.Layout + "@" + r.Digest.String()
	}
	return r.Repo.Name() + "@" + r.Digest.String()
}

// Name is what a label or a provenance names the image by: the
// repository, or "oci:DIR" for a layout.
func (r Ref) Name() string {
	if r.Repo == nil {
		return LayoutPrefix + r.Layout
	}
	return r.Repo.Name()
}

// RefError is ParseRef's error for a string that is no image reference
// at all (a registry reference without its registry, a repository that
// is not lowercase, oci: without a directory): a mistake of whoever
// typed it, which a command line reports as a usage error. Its message
// says how an image is named.
type RefError struct {
	Ref string
	// Why is what is wrong with Ref.
	Why string
	// Layout is Ref's name when it names an OCI layout directory here
	// (the oci: prefix forgotten), "" otherwise.
	Layout string
}

func (e *RefError) Error() string {
	msg := fmt.Sprintf("%s is not an image reference (%s): name an image in a registry as REGISTRY/REPO@sha256:<hex> (docker.io/library/debian@sha256:<hex> for Docker Hub), or one in an OCI layout as oci:DIR@sha256:<hex>", e.Ref, e.Why)
	if e.Layout != "" {
		msg += fmt.Sprintf("; %s is an OCI layout here: %s%s@%s", e.Layout, LayoutPrefix, e.Layout, e.Ref[strings.LastIndex(e.Ref, "@")+1:])
	}
	return msg
}

// ParseRef reads s. A reference without a sha256 digest (a tag alone,
// which anyone who can push may move) is refused base_image_unpinned;
// anything else malformed is a *RefError.
func ParseRef(s string) (Ref, error) {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return Ref{}, refusal.New(refusal.BaseImageUnpinned, "%s names no digest: pin it as REF@sha256:<hex> or oci:DIR@sha256:<hex>", s)
	}
	h, err := v1.NewHash(s[at+1:])
	if err != nil || h.Algorithm != "sha256" {
		return Ref{}, refusal.New(refusal.BaseImageUnpinned, "%s: %q is not a sha256 digest", s, s[at+1:])
	}
	if dir, ok := strings.CutPrefix(s[:at], LayoutPrefix); ok {
		if dir == "" {
			return Ref{}, &RefError{Ref: s, Why: "oci: names no layout directory"}
		}
		return Ref{Layout: filepath.Clean(dir), Digest: h}, nil
	}
	d, err := name.NewDigest(s, name.StrictValidation)
	if err != nil {
		// go-containerregistry's own words ("strict validation requires
		// the registry to be explicitly defined") were the whole line, exit
		// 1, for a layout named without oci: or a registry's host left out.
		e := &RefError{Ref: s, Why: err.Error()}
		if _, nerr := name.NewDigest(s); nerr == nil {
			e.Why = "it names no registry"
		}
		if st, serr := os.Stat(filepath.Join(s[:at], "oci-layout")); serr == nil && st.Mode().IsRegular() {
			e.Layout, e.Why = s[:at], "an OCI layout is named with oci: before its directory"
		}
		return Ref{}, e
	}
	repo := d.Context()
	return Ref{Repo: &repo, Digest: h}, nil
}

// source reads manifests and blobs of one layout or repository, every
// byte checked against the digest that names it.
type source interface {
	// manifest returns the manifest or index named h, checked.
	manifest(ctx context.Context, h v1.Hash) ([]byte, error)
	// tag returns the digest a tag names, ok false when there is none.
	tag(ctx context.Context, tag string) (h v1.Hash, ok bool, err error)
	// blob opens blob h of size bytes; reading it to EOF checks it.
	blob(ctx context.Context, h v1.Hash, size int64) (io.ReadCloser, error)
}

func openSource(r Ref, opts []remote.Option) source {
	if r.Repo == nil {
		return layoutSource(r.Layout)
	}
	return &remoteSource{repo: *r.Repo, opts: withStall(opts)}
}

type layoutSource string

func (l layoutSource) blobPath(h v1.Hash) string {
	return filepath.Join(string(l), "blobs", h.Algorithm, h.Hex)
}

// noLayout turns a read that found no file into fetch_failed when the
// directory is no OCI layout at all (a mistyped path): the image was not
// reached, rather than its digest missing from a layout that exists. A
// read this user was denied is fetch_failed too (denied).
func (l layoutSource) noLayout(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return l.denied(err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, serr := os.Stat(filepath.Join(string(l), "oci-layout")); errors.Is(serr, fs.ErrNotExist) {
		return refusal.Wrap(refusal.FetchFailed, err, "no OCI image layout at %s (no oci-layout file there): check the path", string(l))
	}
	return err
}

// denied is the fetch_failed refusal of a layout read this user was
// denied permission for: the image was not reached, and nothing of it is
// damaged. Its remedy (ActionGrantRead) names the path that denied it,
// the first directory on the way this user may not enter, else the file.
// It was image_digest_mismatch, "the layout does not hold the image as it
// was built: damaged, or changed since; write the image into it again",
// for an executor (another user) reading an operator's layout of 0700.
func (l layoutSource) denied(err error) error {
	d, ok := deniedat.FindErr(err)
	if !ok {
		return refusal.Wrap(refusal.FetchFailed, err, "cannot read the OCI image layout at %s: permission denied to this user (uid %d), which is not damage to the image: run as a user who can read the layout, or give it read access", string(l), os.Geteuid())
	}
	return refusal.Wrap(refusal.FetchFailed, err, "cannot read the OCI image layout at %s: permission denied to this user (uid %d) on %s%s, which is not damage to the image: run as a user who can read the layout, or give it read access", string(l), os.Geteuid(), d.At, d.OwnerNote()).WithRemedy(refusal.ActionGrantRead, d.At)
}

func (l layoutSource) manifest(_ context.Context, h v1.Hash) ([]byte, error) {
	b, err := capped.ReadFile(l.blobPath(h), maxManifest)
	if err != nil {
		return nil, l.noLayout(err)
	}
	return b, checkBytes(b, h, "manifest")
}

func (l layoutSource) tag(_ context.Context, tag string) (v1.Hash, bool, error) {
	b, err := capped.ReadFile(filepath.Join(string(l), "index.json"), maxManifest)
	if err != nil {
		if err = l.noLayout(err); errors.Is(err, fs.ErrNotExist) && refusal.CodeOf(err) == "" {
			// oci-layout and blobs but no index: a build into the
			// directory that did not finish (its index is written last).
			return v1.Hash{}, false, refusal.Wrap(refusal.FetchFailed, err, "the OCI image layout at %s has no index.json, so no tag can be read (a build into it did not finish): build it again", string(l))
		}
		return v1.Hash{}, false, err
	}
	var ix v1.IndexManifest
	if err := decodeLayoutIndex(filepath.Join(string(l), "index.json"), b, &ix); err != nil {
		return v1.Hash{}, false, refusal.Wrap(refusal.ImageDigestMismatch, err, "%s", err)
	}
	for _, d := range ix.Manifests {
		if d.Annotations[refNameAnnotation] == tag {
			return d.Digest, true, nil
		}
	}
	return v1.Hash{}, false, nil
}

func (l layoutSource) blob(_ context.Context, h v1.Hash, size int64) (io.ReadCloser, error) {
	if h.Algorithm != "sha256" || !hexRE.MatchString(h.Hex) {
		return nil, refusal.New(refusal.ImageDigestMismatch, "blob %s: not a sha256 digest", h)
	}
	f, err := capped.Open(l.blobPath(h))
	if err != nil {
		return nil, l.noLayout(err)
	}
	return verifyReader(f, h, size), nil
}

type remoteSource struct {
	repo name.Repository
	opts []remote.Option
}

func (r *remoteSource) manifest(ctx context.Context, h v1.Hash) ([]byte, error) {
	desc, err := remote.Get(r.repo.Digest(h.String()), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	return desc.Manifest, checkBytes(desc.Manifest, h, "manifest")
}

// notReached reports whether err is a registry that could not be asked
// or would not answer — the network, DNS, TLS, a timeout, credentials,
// the registry's own failure (any HTTP status but 404) — rather than an
// answer that differs from the pinned digest or a pinned image it does
// not hold (404): fetch_failed, not image_digest_mismatch.
func notReached(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode != http.StatusNotFound
	}
	return netFailure(err)
}

// netFailure reports whether err is the network's: a URL, a connection,
// a name that did not resolve. Not the net.Error interface: *fs.PathError
// has its methods too, and a layout's missing file is no network's doing.
func netFailure(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de)
}

// headNote is what go-containerregistry adds to the status of a HEAD
// request's error answer, which has no body.
const headNote = " (HEAD responses have no body, use GET for details)"

// quietHead is err without headNote: advice to whoever wrote the
// request, which the operator reading a refusal cannot take ("unexpected
// status code 401 Unauthorized (HEAD responses have no body, use GET for
// details)" before the refusal's own advice); its chain is err's.
func quietHead(err error) error {
	if err == nil || !strings.Contains(err.Error(), headNote) {
		return err
	}
	return headless{err}
}

type headless struct{ error }

func (h headless) Error() string { return strings.Replace(h.error.Error(), headNote, "", 1) }
func (h headless) Unwrap() error { return h.error }

// credentialsRefused reports whether err is a registry's 401 or 403.
func credentialsRefused(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// credentialsAdvice is what to do about refused credentials, for host
// when it is known.
func credentialsAdvice(host string) string {
	if host != "" {
		host = "for " + host + " "
	}
	return " (the registry refused the credentials, or none were given: write them " + host + "in the docker config, $DOCKER_CONFIG/config.json or ~/.docker/config.json, as docker login does)"
}

// CertUntrusted reports whether err is a registry whose TLS certificate
// this host does not trust (an unknown authority, another host's name, an
// expired one). A loopback registry is asked over plain HTTP after HTTPS
// failed, and its answer to that (400 from a TLS-only registry) stood
// alone in the advice: "HTTP 400: check its log".
func CertUntrusted(err error) bool {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// certAdvice is what to do about a registry certificate not trusted.
// A caller's own pool (Transport) is its to name: a library names no flag.
const certAdvice = " (this host does not trust the registry's TLS certificate: trust the CA that signed it, in the system's trust store or a PEM file named by SSL_CERT_FILE; or check that the host is the registry's)"

// notReachedAdvice is what to do about a registry not reached (err a
// network failure): one that refused the connection is down or named by
// the wrong host or port; credentials are no part of it (a registry that
// refuses them answers 401 or 403: credentialsAdvice). broke adds that
// the connection may have broken half-way (a push's).
func notReachedAdvice(err error, broke bool) string {
	var te *transport.Error
	if errors.As(err, &te) {
		// It answered: a status of its own (a 500, a 429), not a
		// registry out of reach.
		return fmt.Sprintf(" (the registry answered HTTP %d: it failed or refused the request; check the registry's state and logs, then try again)", te.StatusCode)
	}
	if errors.Is(err, errTooSlow) {
		return " (the registry, or the network to it, went slower than a byte a millisecond: check them, then try again)"
	}
	if errors.Is(err, errRedirects) {
		return " (check the registry's, or its proxy's, configuration: its redirects go round in a loop)"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return " (the registry was not reached: nothing accepts connections there, so it is down or its host or port is wrong; start it or name the right one)"
	}
	if broke {
		return " (the registry was not reached, or the connection to it broke: check that it is up, its host and the network)"
	}
	return " (the registry was not reached: check that it is up, its host and the network)"
}

// readFailed types an error reading ref that carries no refusal yet:
// fetch_failed when the registry was not reached (notReached), else
// code (what the read was to check).
func readFailed(code refusal.Code, err error, format string, args ...any) error {
	err = quietHead(err)
	switch {
	case refusal.CodeOf(err) != "":
		return err
	case CertUntrusted(err):
		return refusal.Wrap(refusal.FetchFailed, err, format+certAdvice, args...)
	case credentialsRefused(err):
		// The host whose credentials the docker config is to hold, as a
		// push's advice names it: a read's named none.
		host := ""
		if te := (*transport.Error)(nil); errors.As(err, &te) && te.Request != nil && te.Request.URL != nil {
			host = te.Request.URL.Host
		}
		return refusal.Wrap(refusal.FetchFailed, err, format+credentialsAdvice(host), args...)
	case notReached(err):
		return refusal.Wrap(refusal.FetchFailed, err, format+notReachedAdvice(err, false), args...)
	}
	return refusal.Wrap(code, err, format, args...)
}

func (r *remoteSource) tag(ctx context.Context, tag string) (v1.Hash, bool, error) {
	desc, err := remote.Head(r.repo.Tag(tag), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return v1.Hash{}, false, nil
		}
		return v1.Hash{}, false, err
	}
	return desc.Digest, true, nil
}

func (r *remoteSource) blob(ctx context.Context, h v1.Hash, size int64) (io.ReadCloser, error) {
	l, err := remote.Layer(r.repo.Digest(h.String()), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	return verifyReader(rc, h, size), nil
}

// maxManifest caps a manifest, an index or a config read whole.
const maxManifest = 4 << 20

func readAllCapped(rc io.ReadCloser, max int64) ([]byte, error) {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("blob larger than %d bytes", max)
	}
	return b, nil
}

// verifiedImage is an image of a source whose manifest was checked
// against its digest and whose config and layers are checked as read.
type verifiedImage struct {
	src source
	ctx context.Context
	raw []byte
	m   *v1.Manifest
	cfg []byte
	mt  types.MediaType
}

func loadImage(ctx context.Context, src source, h v1.Hash, raw []byte) (v1.Image, *v1.Manifest, error) {
	if raw == nil {
		var err error
		if raw, err = src.manifest(ctx, h); err != nil {
			return nil, nil, err
		}
	}
	if err := imageDocKeys(raw, manifestDocType, "the manifest "+h.String()); err != nil {
		return nil, nil, err
	}
	m, err := v1.ParseManifest(strings.NewReader(string(raw)))
	if err != nil {
		return nil, nil, refusal.Wrap(refusal.ImageDigestMismatch, err, "manifest %s", h)
	}
	if m.Config.Size > maxManifest {
		return nil, nil, refusal.New(refusal.ImageDigestMismatch, "manifest %s: config of %d bytes", h, m.Config.Size)
	}
	rc, err := src.blob(ctx, m.Config.Digest, m.Config.Size)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := readAllCapped(rc, maxManifest)
	if err != nil {
		return nil, nil, err
	}
	if err := imageDocKeys(cfg, configType, fmt.Sprintf("the config %s of the manifest %s", m.Config.Digest, h)); err != nil {
		return nil, nil, err
	}
	mt := m.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	vi := &verifiedImage{src: src, ctx: ctx, raw: raw, m: m, cfg: cfg, mt: mt}
	img, err := partial.CompressedToImage(vi)
	return img, m, err
}

func (i *verifiedImage) RawManifest() ([]byte, error)        { return i.raw, nil }
func (i *verifiedImage) RawConfigFile() ([]byte, error)      { return i.cfg, nil }
func (i *verifiedImage) MediaType() (types.MediaType, error) { return i.mt, nil }
func (i *verifiedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range i.m.Layers {
		if d.Digest == h {
			return &verifiedBlob{img: i, desc: d}, nil
		}
	}
	if i.m.Config.Digest == h {
		return &verifiedBlob{img: i, desc: i.m.Config}, nil
	}
	return nil, fmt.Errorf("blob %s is not in the manifest", h)
}

type verifiedBlob struct {
	img  *verifiedImage
	desc v1.Descriptor
}

func (b *verifiedBlob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b *verifiedBlob) Size() (int64, error)                { return b.desc.Size, nil }
func (b *verifiedBlob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b *verifiedBlob) Compressed() (io.ReadCloser, error) {
	return b.img.src.blob(b.img.ctx, b.desc.Digest, b.desc.Size)
}

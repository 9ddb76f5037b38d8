package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	kgzip "github.com/klauspost/compress/gzip"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

const refNameAnnotation = "org.opencontainers.image.ref.name"

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// base is the pinned base image of a build, read and checked.
type base struct {
	ref Ref
	// img is the platform's image; digest its manifest digest (the ref's
	// own digest, or the index entry's for a multi-platform base).
	img    v1.Image
	digest v1.Hash
	config *v1.ConfigFile
}

// loadBase reads the image ref pins for os/arch (from an index, the
// matching entry), every manifest and config checked against its digest.
func loadBase(ctx context.Context, ref Ref, os, arch string, opts []remote.Option) (*base, error) {
	b, err := loadBaseImage(ctx, ref, os, arch, opts)
	return b, notAsPinned(ref, err)
}

func loadBaseImage(ctx context.Context, ref Ref, os, arch string, opts []remote.Option) (*base, error) {
	src := baseSource{openSource(ref, opts), ref}
	raw, err := src.manifest(ctx, ref.Digest)
	if err != nil {
		return nil, baseErr(ref, err)
	}
	h := ref.Digest
	var probe struct {
		MediaType types.MediaType `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, refusal.Wrap(refusal.ImageDigestMismatch, err, "the base %s", ref)
	}
	if probe.MediaType.IsIndex() || (probe.MediaType == "" && probe.Manifests != nil) {
		// A manifest is checked as loadImage reads it.
		if err := imageDocKeys(raw, manifestDocType, "the index "+h.String()); err != nil {
			return nil, err
		}
		ix, err := v1.ParseIndexManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, refusal.Wrap(refusal.ImageDigestMismatch, err, "the base %s", ref)
		}
		found := false
		for _, d := range ix.Manifests {
			if d.Platform != nil && d.Platform.OS == os && d.Platform.Architecture == arch && d.MediaType.IsImage() {
				h, found = d.Digest, true
				break
			}
		}
		if !found {
			return nil, refusal.New(refusal.PlatformUnsupported, "the base %s has no image for %s/%s: pin a base index that has one, or leave this platform out", ref, os, arch)
		}
		raw = nil
	}
	img, _, err := loadImage(ctx, src, h, raw)
	if err != nil {
		return nil, baseErr(ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, refusal.Wrap(refusal.ImageDigestMismatch, err, "the base %s: config", ref)
	}
	if cfg.OS != os || cfg.Architecture != arch {
		// A digest of one platform's image builds that platform only.
		return nil, refusal.New(refusal.PlatformUnsupported, "the base %s is %s/%s, the platform needs %s/%s: pin a multi-platform base by its index's digest (one with a %s/%s image), or leave this platform out",
			ref, cfg.OS, cfg.Architecture, os, arch, os, arch)
	}
	return &base{ref: ref, img: img, digest: h, config: cfg}, nil
}

func baseErr(ref Ref, err error) error {
	return readFailed(refusal.ImageDigestMismatch, err, "cannot read the base image %s", ref)
}

// baseSource reads a build's base: an image_digest_mismatch refusal of
// any read, its manifest's or a layer's (the interpreter scan's, the
// layout writer's, the push's), names the base and says what to do
// (notAsPinned).
type baseSource struct {
	source
	ref Ref
}

func (s baseSource) manifest(ctx context.Context, h v1.Hash) ([]byte, error) {
	raw, err := s.source.manifest(ctx, h)
	return raw, notAsPinned(s.ref, err)
}

func (s baseSource) blob(ctx context.Context, h v1.Hash, size int64) (io.ReadCloser, error) {
	rc, err := s.source.blob(ctx, h, size)
	if err != nil {
		return nil, notAsPinned(s.ref, registryBaseFailed(s.ref, err))
	}
	return pinnedReader{rc, s.ref}, nil
}

// registryBaseFailed types a failure to read a layer of the registry base
// ref, which the layout writer and the push read long after the build
// began: fetch_failed saying it is the base's registry and what to do (a
// connection refused or cut short; the registry's credentials refused,
// its certificate untrusted), image_digest_mismatch for any other
// answer. A docker-registry stopped while the layout was written made
// the build fail "cannot write the layout DIR: Get …: connection
// refused", exit 1, blaming the layout (TestBaseRegistryDownMidBuild).
// A layout base's errors, an interruption's and a refusal are returned
// as they are.
func registryBaseFailed(ref Ref, err error) error {
	if ref.Repo == nil || err == nil || err == io.EOF || refusal.CodeOf(err) != "" ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return refusal.Wrap(refusal.FetchFailed, err, "cannot read the base image %s (its registry's connection broke while a layer was read: check that it is up, its host and the network, then build again)", ref)
	}
	return readFailed(refusal.ImageDigestMismatch, err, "cannot read the base image %s", ref)
}

// pinnedReader is a base blob's reader whose refusals say they are the
// base's (notAsPinned).
type pinnedReader struct {
	io.ReadCloser
	ref Ref
}

func (r pinnedReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = notAsPinned(r.ref, registryBaseFailed(r.ref, err))
	}
	return n, err
}

// notAsPinned adds to an image_digest_mismatch refusal of the base ref
// the base it is about and what to do, once; any other error is
// returned as it is. A base layer that did not hash to its digest was
// refused "blob sha256:… hashes to sha256:…" alone, naming neither the
// base nor a next step, and a digest the layout or registry does not
// hold said only that its file or manifest was not found (DESIGN §2).
func notAsPinned(ref Ref, err error) error {
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.ImageDigestMismatch || strings.Contains(re.Detail, baseAdvice) || strings.Contains(re.Detail, ambiguousBase) {
		return err
	}
	out := *re
	if !strings.Contains(out.Detail, ref.String()) {
		out.Detail = "the base image " + ref.String() + ": " + out.Detail
	}
	if pinnedKeys(err) {
		out.Detail += " (" + ambiguousBase + ")"
		return &out
	}
	if ref.Repo == nil {
		out.Detail += " (" + baseAdvice + ": a mistyped digest, or the base missing from the layout, damaged or changed there; check the digest, or write the base into the layout again, copying it from its registry)"
	} else {
		out.Detail += " (" + baseAdvice + ": a mistyped digest or repository, or the base missing there, damaged or changed; check the digest and the repository)"
	}
	return &out
}

// baseAdvice begins what notAsPinned adds.
const baseAdvice = "the base is not as it was pinned"

// node is one path of the base's merged file system.
type node struct {
	typeflag byte
	link     string
	// versions are the distinct PY_VERSION strings found in the file
	// (interpreter candidates only), at most maxVersions.
	versions []string
}

// captureRE names the files whose bytes the scan searches: interpreters
// and libpython, where CPython's version string lives.
var captureRE = regexp.MustCompile(`^(python3(\.[0-9]+)?t?|libpython3\.[0-9]+t?\.so(\.[0-9.]+)?)$`)

// maxCapture caps one searched file.
const maxCapture = 64 << 20

// The scan's bounds: a base is read whole to find its interpreter, and a
// hostile or huge one (millions of entries, or of files named python3)
// must not make that unbounded. maxScanEntries caps the tar entries of
// all its layers, maxCandidates the files captureRE names (and want)
// whose bytes are searched, maxCandidateBytes their bytes in all; a real
// base has some thousands of entries and a handful of candidates. Only
// the version strings of a candidate are kept, never its bytes. Vars,
// so that tests can lower them.
var (
	maxScanEntries    = 1 << 21
	maxCandidates     = 64
	maxCandidateBytes = int64(1 << 30)
)

// maxVersions caps the distinct version strings kept of one file: more
// than one is already a refusal (versionIn).
const maxVersions = 8

// scanBudget is what is left of the scan's bounds.
type scanBudget struct {
	entries, candidates int
	bytes               int64
	buf                 []byte
}

func newScanBudget() *scanBudget {
	return &scanBudget{entries: maxScanEntries, candidates: maxCandidates, bytes: maxCandidateBytes}
}

// scanFS merges the base's layers (whiteouts applied) into a map of
// paths, reading them but never running anything, and keeps the version
// strings of files captureRE names and of want.
func scanFS(img v1.Image, want string) (map[string]*node, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	fs := map[string]*node{}
	budget := newScanBudget()
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		err = scanLayer(rc, fs, want, budget)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// scanLayer merges one layer into fs. Its whiteouts hide what the lower
// layers hold, not its own entries (OCI image-spec, "Whiteouts"), and
// are applied in one pass over fs when the layer is read: applied as
// read, each was a pass over every path, which a layer of a million
// whiteouts over a million files made hours long.
func scanLayer(rc io.Reader, fs map[string]*node, want string, budget *scanBudget) error {
	zr, err := kgzip.NewReader(rc)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	upper := map[string]*node{}
	opaque := map[string]bool{} // directories whose lower contents are hidden
	gone := map[string]bool{}   // paths hidden with what is under them
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if budget.entries--; budget.entries < 0 {
			return refusal.New(refusal.InterpreterMismatch, "the base image has more than %d files, more than are read to find its interpreter; build on a smaller base", maxScanEntries)
		}
		p := path.Clean("/" + h.Name)
		dir, base := path.Split(p)
		if base == ".wh..wh..opq" {
			opaque[path.Clean(dir)] = true
			continue
		}
		if w, ok := strings.CutPrefix(base, ".wh."); ok {
			gone[path.Join(dir, w)] = true
			continue
		}
		n := &node{typeflag: h.Typeflag, link: h.Linkname}
		if h.Typeflag == tar.TypeLink {
			t, ok := upper[path.Clean("/"+h.Linkname)]
			if !ok {
				t, ok = fs[path.Clean("/"+h.Linkname)]
			}
			if ok {
				n = &node{typeflag: t.typeflag, link: t.link, versions: t.versions}
			}
		}
		if h.Typeflag == tar.TypeReg && h.Size <= maxCapture && (captureRE.MatchString(base) || p == want) {
			if budget.candidates--; budget.candidates < 0 {
				return refusal.New(refusal.InterpreterMismatch, "the base image has more than %d files named like an interpreter or libpython (python3*, libpython3*.so*), more than are read to find its interpreter; build on a base with one Python", maxCandidates)
			}
			if budget.bytes -= h.Size; budget.bytes < 0 {
				return refusal.New(refusal.InterpreterMismatch, "the base image's files named like an interpreter or libpython (python3*, libpython3*.so*) hold more than %d bytes, more than are read to find its interpreter; build on a base with one Python", maxCandidateBytes)
			}
			if n.versions, err = budget.versionsIn(tr); err != nil {
				return err
			}
		}
		upper[p] = n
	}
	if len(opaque) > 0 || len(gone) > 0 {
		for k := range fs {
			if hidden(k, opaque, gone) {
				delete(fs, k)
			}
		}
	}
	for k, n := range upper {
		fs[k] = n
	}
	// Drain to the end so that the blob's digest is checked.
	_, err = io.Copy(io.Discard, rc)
	return err
}

// hidden reports whether the lower layers' path k is hidden by a
// layer's whiteouts: k or a directory above it whited out, or a
// directory above it made opaque.
func hidden(k string, opaque, gone map[string]bool) bool {
	if gone[k] {
		return true
	}
	for d := k; d != "/"; {
		d = path.Dir(d)
		if gone[d] || opaque[d] {
			return true
		}
	}
	return false
}

// versionOverlap is how much of a chunk is searched again with the next
// one, so that a version string across two reads is found: longer than
// any PY_VERSION with its NULs ("\x003.14.0rc3+\x00").
const versionOverlap = 64

// versionsIn streams r through versionRE and returns the distinct
// version strings in it (at most maxVersions), holding one buffer.
func (b *scanBudget) versionsIn(r io.Reader) ([]string, error) {
	if b.buf == nil {
		b.buf = make([]byte, versionOverlap+256<<10)
	}
	var out []string
	keep := 0
	for {
		k, err := io.ReadFull(r, b.buf[keep:])
		chunk := b.buf[:keep+k]
		for _, m := range versionRE.FindAllSubmatch(chunk, -1) {
			if v := string(m[1]); len(out) < maxVersions && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		keep = copy(b.buf, chunk[len(chunk)-versionOverlap:])
	}
}

// resolve follows symlinks in fs for p, component by component, as the
// kernel would inside the image; it returns the real path.
func resolve(fs map[string]*node, p string) (string, error) {
	hops := 0
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for len(parts) > 0 {
		next := path.Join(cur, parts[0])
		parts = parts[1:]
		n, ok := fs[next]
		if !ok {
			return "", fmt.Errorf("%s does not exist in the image", next)
		}
		if n.typeflag != tar.TypeSymlink {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		target := n.link
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		parts = append(strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/"), parts...)
		cur = "/"
	}
	return cur, nil
}

// Interpreter is the base image's Python interpreter as read from its
// files: its real path in the image and its full version ("3.11.2"),
// read from the interpreter or its libpython. It is the one interpreter
// identity of digest (the local digest's input), as the env built for it
// names the same path and version.
type Interpreter = digest.Interpreter

// interpreterCandidates are tried in order when --python is not given.
var interpreterCandidates = []string{"/usr/local/bin/python3", "/usr/bin/python3"}

var pyNameRE = regexp.MustCompile(`^python(3\.[0-9]+)t?$`)

// findInterpreter names the interpreter of fs: want (an in-image path)
// or the first candidate that exists, its real path and its version.
func findInterpreter(fs map[string]*node, want string) (*Interpreter, error) {
	cands := interpreterCandidates
	if want != "" {
		cands = []string{want}
	}
	var errs []string
	for _, c := range cands {
		real, err := resolve(fs, c)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n := fs[real]
		if n.typeflag != tar.TypeReg && n.typeflag != tar.TypeRegA {
			errs = append(errs, real+" is not a regular file")
			continue
		}
		m := pyNameRE.FindStringSubmatch(path.Base(real))
		if m == nil {
			return nil, refusal.New(refusal.InterpreterMismatch, "the image's interpreter %s (from %s) is not named pythonX.Y, so its version cannot be read from its files: name the interpreter's path in the image", real, c).WithRemedy(refusal.ActionNamePython, "")
		}
		v, err := versionIn(fs, real, m[1])
		if err != nil {
			return nil, err
		}
		return &Interpreter{Path: real, Version: v}, nil
	}
	return nil, refusal.New(refusal.InterpreterMismatch, "no Python interpreter found in the base image (%s): name the interpreter's path in the image", strings.Join(errs, "; ")).WithRemedy(refusal.ActionNamePython, "")
}

var versionRE = regexp.MustCompile(`\x00(3\.[0-9]+\.[0-9]+(?:(?:a|b|rc)[0-9]+)?\+?)\x00`)

// versionIn reads CPython's PY_VERSION string ("3.11.2", NUL-terminated
// in the binary) of xy from the interpreter at real, or from a libpython
// of xy in the image when the interpreter links it. Exactly one distinct
// version must be found.
func versionIn(fs map[string]*node, real, xy string) (string, error) {
	find := func(vs []string) map[string]bool {
		out := map[string]bool{}
		for _, v := range vs {
			if strings.HasPrefix(v, xy+".") {
				out[v] = true
			}
		}
		return out
	}
	found := find(fs[real].versions)
	if len(found) == 0 {
		for p, n := range fs {
			if strings.HasPrefix(path.Base(p), "libpython"+xy) && n.versions != nil {
				for v := range find(n.versions) {
					found[v] = true
				}
			}
		}
	}
	if len(found) != 1 {
		vs := make([]string, 0, len(found))
		for v := range found {
			vs = append(vs, v)
		}
		return "", refusal.New(refusal.InterpreterMismatch, "cannot read the version of the image's %s from its files (found %v)", real, vs)
	}
	for v := range found {
		return v, nil
	}
	return "", nil
}

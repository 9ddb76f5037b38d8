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
	src := openSource(ref, opts)
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
			return nil, refusal.New(refusal.PlatformUnsupported, "the base %s has no image for %s/%s", ref, os, arch)
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
		return nil, refusal.New(refusal.PlatformUnsupported, "the base %s is %s/%s, the platform needs %s/%s", ref, cfg.OS, cfg.Architecture, os, arch)
	}
	return &base{ref: ref, img: img, digest: h, config: cfg}, nil
}

func baseErr(ref Ref, err error) error {
	return readFailed(refusal.ImageDigestMismatch, err, "cannot read the base image %s", ref)
}

// node is one path of the base's merged file system.
type node struct {
	typeflag byte
	link     string
	data     []byte // captured content (interpreter candidates only)
}

// captureRE names the files whose bytes the scan keeps: interpreters and
// libpython, where CPython's version string lives.
var captureRE = regexp.MustCompile(`^(python3(\.[0-9]+)?t?|libpython3\.[0-9]+t?\.so(\.[0-9.]+)?)$`)

// maxCapture caps one captured file.
const maxCapture = 64 << 20

// scanFS merges the base's layers (whiteouts applied) into a map of
// paths, reading them but never running anything, and keeps the bytes
// of files captureRE names and of want.
func scanFS(img v1.Image, want string) (map[string]*node, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	fs := map[string]*node{}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		err = scanLayer(rc, fs, want)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return fs, nil
}

func scanLayer(rc io.Reader, fs map[string]*node, want string) error {
	zr, err := kgzip.NewReader(rc)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := path.Clean("/" + h.Name)
		dir, base := path.Split(p)
		if base == ".wh..wh..opq" {
			for k := range fs {
				if strings.HasPrefix(k, dir) {
					delete(fs, k)
				}
			}
			continue
		}
		if w, ok := strings.CutPrefix(base, ".wh."); ok {
			gone := path.Join(dir, w)
			delete(fs, gone)
			for k := range fs {
				if strings.HasPrefix(k, gone+"/") {
					delete(fs, k)
				}
			}
			continue
		}
		n := &node{typeflag: h.Typeflag, link: h.Linkname}
		if h.Typeflag == tar.TypeLink {
			if t, ok := fs[path.Clean("/"+h.Linkname)]; ok {
				n = &node{typeflag: t.typeflag, link: t.link, data: t.data}
			}
		}
		if h.Typeflag == tar.TypeReg && h.Size <= maxCapture && (captureRE.MatchString(base) || p == want) {
			if n.data, err = io.ReadAll(tr); err != nil {
				return err
			}
		}
		fs[p] = n
	}
	// Drain to the end so that the blob's digest is checked.
	_, err = io.Copy(io.Discard, rc)
	return err
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
			return nil, refusal.New(refusal.InterpreterMismatch, "the image's interpreter %s (from %s) is not named pythonX.Y, so its version cannot be read from its files: name it with --python", real, c)
		}
		v, err := versionIn(fs, real, m[1])
		if err != nil {
			return nil, err
		}
		return &Interpreter{Path: real, Version: v}, nil
	}
	return nil, refusal.New(refusal.InterpreterMismatch, "no Python interpreter found in the base image (%s): name one with --python PATH_IN_IMAGE", strings.Join(errs, "; "))
}

var versionRE = regexp.MustCompile(`\x00(3\.[0-9]+\.[0-9]+(?:(?:a|b|rc)[0-9]+)?\+?)\x00`)

// versionIn reads CPython's PY_VERSION string ("3.11.2", NUL-terminated
// in the binary) of xy from the interpreter at real, or from a libpython
// of xy in the image when the interpreter links it. Exactly one distinct
// version must be found.
func versionIn(fs map[string]*node, real, xy string) (string, error) {
	find := func(b []byte) map[string]bool {
		out := map[string]bool{}
		for _, m := range versionRE.FindAllSubmatch(b, -1) {
			if v := string(m[1]); strings.HasPrefix(v, xy+".") {
				out[v] = true
			}
		}
		return out
	}
	found := find(fs[real].data)
	if len(found) == 0 {
		for p, n := range fs {
			if strings.HasPrefix(path.Base(p), "libpython"+xy) && n.data != nil {
				for v := range find(n.data) {
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

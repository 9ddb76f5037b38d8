package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/deniedat"
	"github.com/cruxible/cruxprov/refusal"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layoutWriter writes images into an OCI image layout (image-spec's
// image-layout.md) crash-safely, which go-containerregistry's layout
// package does not: it writes a blob whose digest it knows straight to
// its final name and index.json in place, neither synced, so a crash
// leaves a layout whose index names a blob that is not all there.
//
// Here every blob is written to a temp file in blobs/sha256, hashed as it
// is written (other bytes than its digest are refused), synced, and
// renamed into place; a blob already there is rehashed and kept only if it
// is right (otherwise rewritten). index.json is written last, the same way,
// once every blob it names is synced and the directory too: after a crash
// the layout is the old one or the new one. One writer at a time per
// layout: writeLayout holds the layout directory's flock (lockLayout)
// while it writes, and another build into the layout waits for it.
//
// A blob's temp file is flocked by its writer, and a writer opening the
// layout removes the temps nobody holds: those of a build killed while it
// wrote (an env layer's is tens of MB). A cancelled ctx stops the writing
// between two reads and before index.json is replaced: the layout stays
// the old one (with the new blobs written so far, correct and unnamed).
type layoutWriter struct {
	ctx   context.Context
	dir   string
	blobs string
	done  map[v1.Hash]bool
	buf   []byte
}

func newLayoutWriter(ctx context.Context, dir string) (*layoutWriter, error) {
	w := &layoutWriter{ctx: ctx, dir: dir, blobs: filepath.Join(dir, "blobs", "sha256"), done: map[v1.Hash]bool{}, buf: make([]byte, 1<<20)}
	if err := checkOutputFiles(dir); err != nil { // a write refused is layoutWriteFailed's to say
		return nil, err
	}
	if err := os.MkdirAll(w.blobs, 0o755); err != nil {
		return nil, err
	}
	w.removeDeadTemps()
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return w, nil
}

// another is what CheckOutput advises for a directory that is no layout.
const another = "name a new or empty directory, or an OCI image layout"

// CheckOutput returns an error unless dir may be written as an OCI image
// layout (Options.Output) without mixing the image into other files: a
// path that does not exist, an empty directory, an OCI image layout (it
// has its oci-layout file), or what a layout writer killed before it
// wrote oci-layout left (blobs/, index.json and their temp files alone).
// A directory of other files was written into as it was: blobs/,
// index.json and oci-layout among them, a layout no tool would take for
// one, or, in a project directory, a mess (TestOutputNotALayout). This
// user must be able to write it, or make it (a build found that it could
// not once the image was built). Each error is one line that begins with
// dir and says what to do.
func CheckOutput(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Made by the writer: the nearest directory above it must let
		// this user make it.
		above := filepath.Dir(dir)
		for {
			if _, err := os.Stat(above); err == nil || !errors.Is(err, fs.ErrNotExist) || filepath.Dir(above) == above {
				break
			}
			above = filepath.Dir(above)
		}
		if err := unix.Faccessat(unix.AT_FDCWD, above, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
			return fmt.Errorf("%s cannot be made by this user (uid %d): %s is not writable by it (%v); name a directory it can write, or build as a user who can", dir, os.Geteuid(), above, err)
		}
		return nil
	case errors.Is(err, unix.ENOTDIR):
		at := deniedat.NotDir(dir)
		if at == "" {
			at = "a part"
		}
		return fmt.Errorf("%s cannot be a directory: %s on its path is a file; %s", dir, at, another)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s is out of this user's reach (uid %d: permission denied on a directory above it); name a directory it can write, or build as a user who can", dir, os.Geteuid())
	case err != nil:
		return fmt.Errorf("%s cannot be checked as an OCI image layout's directory (%v); %s", dir, bare(err), another)
	case fi.IsDir():
		if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
			return fmt.Errorf("%s is not writable by this user (uid %d: %v); name a directory it can write, or build as a user who can", dir, os.Geteuid(), err)
		}
	}
	return checkOutputFiles(dir)
}

// checkOutputFiles is CheckOutput's check of what the directory dir
// holds, which the layout writer makes again when it opens dir: what is
// there is a layout, or nothing but a killed writer's files.
func checkOutputFiles(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s cannot be checked as an OCI image layout's directory: %w", dir, bare(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory to write an OCI image layout into: %s", dir, another)
	}
	if _, err := os.Lstat(filepath.Join(dir, "oci-layout")); err == nil {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%s cannot be listed by this user (uid %d: permission denied), to tell whether it holds other files; name a directory it can read and write, or build as a user who can", dir, os.Geteuid())
	}
	if err != nil {
		return fmt.Errorf("%s cannot be listed (%v), to tell whether it holds other files; %s", dir, bare(err), another)
	}
	var other []string
	for _, e := range ents {
		n := e.Name()
		if n == "blobs" || n == "index.json" || strings.HasPrefix(n, ".tmp-oci-layout-") || strings.HasPrefix(n, ".tmp-index.json-") {
			continue
		}
		other = append(other, n)
	}
	if len(other) == 0 {
		return nil
	}
	slices.Sort(other)
	some := strings.Join(other[:min(len(other), 3)], ", ")
	if len(other) > 3 {
		some += ", …"
	}
	return fmt.Errorf("%s is not an OCI image layout (it has no oci-layout file) and holds other files (%s): the image is not written among them; %s, to write it into", dir, some, another)
}

// bare is err without the path an *fs.PathError adds (the message names
// the path already).
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// image writes an image's blobs: its layers, config and manifest.
func (w *layoutWriter) image(img v1.Image) (v1.Descriptor, error) {
	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, err
		}
		size, err := l.Size()
		if err != nil {
			return v1.Descriptor{}, err
		}
		if err := w.blob(d, size, l.Compressed); err != nil {
			return v1.Descriptor{}, err
		}
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := w.bytes(cd, cfg); err != nil {
		return v1.Descriptor{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return w.manifest(raw, mt)
}

// index writes an index's blobs: every image it lists, then itself.
func (w *layoutWriter) index(ix v1.ImageIndex) (v1.Descriptor, error) {
	im, err := ix.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() {
			return v1.Descriptor{}, fmt.Errorf("index entry %s is a %s, not an image", d.Digest, d.MediaType)
		}
		img, err := ix.Image(d.Digest)
		if err != nil {
			return v1.Descriptor{}, err
		}
		if _, err := w.image(img); err != nil {
			return v1.Descriptor{}, err
		}
	}
	raw, err := ix.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := ix.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return w.manifest(raw, mt)
}

func (w *layoutWriter) manifest(raw []byte, mt types.MediaType) (v1.Descriptor, error) {
	sum := sha256.Sum256(raw)
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	if err := w.bytes(d, raw); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: int64(len(raw)), Digest: d}, nil
}

func (w *layoutWriter) bytes(d v1.Hash, b []byte) error {
	return w.blob(d, int64(len(b)), func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// blob makes blobs/sha256/<hex> hold the size bytes of digest d, read
// from open only when the blob is not there with those bytes already.
func (w *layoutWriter) blob(d v1.Hash, size int64, open func() (io.ReadCloser, error)) error {
	if d.Algorithm != "sha256" || !hexRE.MatchString(d.Hex) {
		return fmt.Errorf("blob digest %s is not a sha256", d)
	}
	if w.done[d] {
		return nil
	}
	final := filepath.Join(w.blobs, d.Hex)
	if f, err := capped.Open(final); err == nil {
		got, n, err := w.hash(f, io.Discard)
		f.Close()
		if err == nil && got == d.Hex && n == size {
			_ = os.Chmod(final, 0o644) // a blob owned by someone else stays as it is
			w.done[d] = true
			return nil
		}
	}
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(w.blobs, tempPrefix+d.Hex+"-*")
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// Owned while it lives (removeDeadTemps); a name removed before the
	// lock was taken only makes the rename fail.
	if err := unix.Flock(int(tmp.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	got, n, err := w.hash(ctxReader{w.ctx, rc}, tmp)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	if got != d.Hex || n != size {
		return fmt.Errorf("blob %s: the bytes given are %d bytes of sha256:%s", d, n, got)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return err
	}
	committed = true
	w.done[d] = true
	return nil
}

// tempPrefix starts the name of a blob being written.
const tempPrefix = ".tmp-"

// removeDeadTemps removes the blob temps in the layout that no writer
// holds (flock): a killed build's.
func (w *layoutWriter) removeDeadTemps() {
	ents, err := os.ReadDir(w.blobs)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(w.blobs, e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.Remove(p)
		}
		f.Close()
	}
}

// ctxReader is r that fails once ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("interrupted: %w", err)
	}
	return c.r.Read(p)
}

func (w *layoutWriter) hash(r io.Reader, dst io.Writer) (string, int64, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(h, dst), r, w.buf)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// commit syncs the blob directory, then replaces index.json: entries for
// which drop is true go, adds come after the rest (each with its ref name
// annotation), and the file is written atomically.
func (w *layoutWriter) commit(drop func(v1.Descriptor) bool, adds []v1.Descriptor) error {
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; index.json was left as it was: %w", err)
	}
	if err := atomicfile.SyncDir(w.blobs); err != nil {
		return err
	}
	file := filepath.Join(w.dir, "index.json")
	ix := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	raw, err := capped.ReadFile(file, maxManifest)
	switch {
	case err == nil:
		// Each key once, as the read of a layout's index.json for its
		// tags (layoutSource.tag): one with "manifests" twice was
		// rewritten with the last, the first's entries dropped without a
		// word, where a reader taking the first reads those, and image
		// verify of the same layout refuses it.
		if err := decodeLayoutIndex(file, raw, &ix); err != nil {
			return refusal.Wrap(refusal.ImageDigestMismatch, err, "%s; it was not rewritten (a rewrite keeps one reading of it), and index.json is as it was: restore it from a copy of the layout, or move it away and write the image again (the index.json written anew names only the images that write writes), or write the image into another layout", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	ix.Manifests = slices.DeleteFunc(ix.Manifests, drop)
	ix.Manifests = append(ix.Manifests, adds...)
	out, err := json.Marshal(ix)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(file, out, 0o644)
}

package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/pgzip"
)

// GzipLevel is the fixed deflate level of every layer cruxprov writes,
// with github.com/klauspost/compress's deflate (about twice as fast as the
// standard library's at the same ratio): a layer's bytes (and so the
// image digest) depend on it, on GzipBlock and on that library's release,
// which cruxprov's version (in the provenance) pins.
const GzipLevel = 6

// GzipBlock is the size of the blocks a layer is cut into and compressed
// in parallel (github.com/klauspost/pgzip: each block is deflated with
// the 32 KiB before it as its dictionary and ends in a sync flush), so
// that a build uses every core. The bytes depend on the block size, never
// on how many cores compressed them: one block size, one digest.
const GzipBlock = 1 << 20

// entry is one member of a layer: a directory, a regular file read from
// src (or data), or a symlink.
type entry struct {
	name     string // in-image path without the leading slash
	typeflag byte
	mode     int64
	src      string // file to copy, "" for data
	data     []byte
	link     string
}

// fileLayer is a layer written to a file: a gzip-compressed tar whose
// digest, diff id and size were computed while it was written.
type fileLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *fileLayer) Size() (int64, error)     { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}
func (l *fileLayer) Compressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	return verifyReader(f, l.digest, l.size), nil
}
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	zr, err := kgzip.NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, rc}, nil
}

// writeLayer writes entries, sorted by name (byte order), as a gzip tar
// at dst: every header with mtime epoch, uid and gid 0, no user or group
// names, no PAX records (USTAR or GNU format only as the names need), a
// fixed gzip level and an empty gzip header, so that the same entries
// always give the same bytes.
func writeLayer(ctx context.Context, dst string, entries []entry, epoch time.Time) (*fileLayer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	for i := 1; i < len(entries); i++ {
		if entries[i].name == entries[i-1].name {
			return nil, fmt.Errorf("two layer entries named %s", entries[i].name)
		}
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zsum, tsum := sha256.New(), sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, zsum)}
	zw, err := pgzip.NewWriterLevel(cw, GzipLevel)
	if err != nil {
		return nil, err
	}
	// An empty header: no name, mtime 0, OS unknown (255), as gzip -n.
	zw.ModTime, zw.OS = time.Unix(0, 0), 255
	if err := zw.SetConcurrency(GzipBlock, max(2, runtime.GOMAXPROCS(0))); err != nil {
		return nil, err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, tsum))
	buf := make([]byte, 256<<10)
	for _, e := range entries {
		// An env layer takes seconds to compress: a signal stops it
		// between two files (the caller removes dst).
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted while the layer was written: %w", err)
		}
		h := &tar.Header{
			Name: e.name, Typeflag: e.typeflag, Mode: e.mode, ModTime: epoch,
			Format: tar.FormatGNU, Linkname: e.link,
		}
		if len(e.name) <= 100 && len(e.link) <= 100 {
			h.Format = tar.FormatUSTAR
		}
		if e.typeflag == tar.TypeDir {
			h.Name += "/"
		}
		var src *os.File
		if e.typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
			if e.src != "" {
				if src, err = os.Open(e.src); err != nil {
					return nil, err
				}
				fi, err := src.Stat()
				if err != nil {
					src.Close()
					return nil, err
				}
				h.Size = fi.Size()
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			if src != nil {
				src.Close()
			}
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if src != nil {
			n, err := io.CopyBuffer(tw, io.LimitReader(src, h.Size), buf)
			src.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.name, err)
			}
			if n != h.Size {
				return nil, fmt.Errorf("%s changed size while it was written", e.name)
			}
		} else if len(e.data) > 0 {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return &fileLayer{path: dst, digest: hashOf(zsum), diffID: hashOf(tsum), size: cw.n}, nil
}

// treeEntries lists the tree rooted at dir as layer entries below prefix
// (an in-image path without its leading slash), with prefix's own parent
// directories first. Modes are normalized: directories 0755, regular
// files 0755 when any execute bit is set and 0644 otherwise, symlinks
// 0777; anything else is refused.
func treeEntries(dir, prefix string) ([]entry, error) {
	var out []entry
	for p := prefix; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		out = append(out, entry{name: p, typeflag: tar.TypeDir, mode: 0o755})
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := prefix + "/" + filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			out = append(out, entry{name: name, typeflag: tar.TypeDir, mode: 0o755})
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := int64(0o644)
			if fi.Mode().Perm()&0o111 != 0 {
				mode = 0o755
			}
			out = append(out, entry{name: name, typeflag: tar.TypeReg, mode: mode, src: p})
		case t&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, entry{name: name, typeflag: tar.TypeSymlink, mode: 0o777, link: l})
		default:
			return fmt.Errorf("%s is neither a file, a directory nor a symlink", p)
		}
		return nil
	})
	return out, err
}

// parents are the directory entries above name (an in-image path), top first.
func parents(name string) []entry {
	var out []entry
	for p := path.Dir(name); p != "." && p != "/"; p = path.Dir(p) {
		out = append([]entry{{name: p, typeflag: tar.TypeDir, mode: 0o755}}, out...)
	}
	return out
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func hashOf(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

// inImage turns an absolute in-image path into a layer member name.
func inImage(p string) string { return strings.TrimPrefix(path.Clean(p), "/") }

// Package treehash owns the tree digest of a directory (DESIGN §5): one
// record per entry below the root, in byte order of the relative paths
// ("F<x> <size> <sha256hex> <path>\0" for a file, "D- 0 - <path>\0" for a
// directory, "L- <len> <sha256hex of the target> <path>\0" for a symlink),
// hashed with sha256; Walk lists and hashes a tree in parallel without
// following links, Of digests entries already known (a verifier's stat
// index), Sum does both. Anything but a regular file, directory or symlink,
// and a name that is not UTF-8, is refused.
//
// It does not seal, compare with an index (package seal does), or print.
package treehash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/digest"
)

// Kind is the kind of a tree entry, the letter its record starts with.
type Kind byte

// The entry kinds a tree may hold; anything else is refused.
const (
	File    Kind = 'F'
	Dir     Kind = 'D'
	Symlink Kind = 'L'
)

// Entry is one entry below a tree's root. Path is relative to the root,
// '/'-separated, UTF-8. For a File, Exec says whether any execute bit is
// set, Size is its length and SHA256 the hash of its bytes; for a Symlink,
// Size is the length of the target and SHA256 the hash of the target bytes
// (the link is never followed); for a Dir, Size is 0 and SHA256 is zero.
type Entry struct {
	Path   string
	Kind   Kind
	Exec   bool
	Size   int64
	SHA256 [32]byte
}

// Sentinels a *Error wraps; test with errors.Is.
var (
	// ErrNonUTF8Name: a name below the root is not valid UTF-8.
	ErrNonUTF8Name = errors.New("name is not valid UTF-8")
	// ErrSpecialFile: an entry is a device, FIFO or socket (or the root is
	// not a directory).
	ErrSpecialFile = errors.New("not a regular file, directory or symlink")
	// ErrChanged: a file changed while it was being hashed.
	ErrChanged = errors.New("changed while it was hashed")
)

// Error says why a tree cannot be digested: the offending path (relative
// to the root for entries below it), a reason, and the cause (one of the
// sentinels above, or an I/O error).
type Error struct {
	Path   string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("tree: %q: %s", e.Path, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Of returns the tree digest (DESIGN §5) of entries: the sha256 of
// the concatenation, in byte order of Path, of one record per entry:
//
//	regular file  "F" x " " size " " sha256hex " " path "\x00"
//	directory     "D- 0 - " path "\x00"
//	symlink       "L- " len(target) " " sha256hex(target) " " path "\x00"
//
// where x is "x" when any execute bit is set and "-" otherwise, size is
// decimal, sha256hex is 64 lowercase hex digits, and path is relative to
// the root, '/'-separated, without a leading "./". The root itself has no
// record. It sorts a copy; entries must have distinct, valid paths (as
// Walk returns them).
func Of(entries []Entry) digest.Digest {
	sorted := entries
	if !slices.IsSortedFunc(entries, cmpEntry) {
		sorted = slices.Clone(entries)
		slices.SortFunc(sorted, cmpEntry)
	}
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for i := range sorted {
		buf = appendRecord(buf, &sorted[i])
		if len(buf) > 60<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return digest.FromBytes(h.Sum(nil))
}

func cmpEntry(a, b Entry) int { return strings.Compare(a.Path, b.Path) }

// appendRecord appends e's tree record.
func appendRecord(b []byte, e *Entry) []byte {
	return AppendRecord(b, e.Kind, e.Exec, e.Size, &e.SHA256, e.Path)
}

// AppendRecord appends one entry's record of the tree digest (§5,
// docs/digests.md) to b: "D- 0 - PATH\0" for a directory, else
// "KX SIZE SHA256HEX PATH\0", K the kind letter and X 'x' for a file with
// an execute bit (exec is ignored for other kinds), '-' otherwise. It is
// for callers that keep entries in their own form (the seal's stat index)
// and hash them in path order without copying them into Entry values.
func AppendRecord(b []byte, kind Kind, exec bool, size int64, sum *[32]byte, path string) []byte {
	switch kind {
	case Dir:
		b = append(b, "D- 0 - "...)
	default:
		b = append(b, byte(kind))
		if kind == File && exec {
			b = append(b, 'x')
		} else {
			b = append(b, '-')
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, size, 10)
		b = append(b, ' ')
		b = hex.AppendEncode(b, sum[:])
		b = append(b, ' ')
	}
	b = append(b, path...)
	return append(b, 0)
}

// Sum walks root with Walk and returns the tree digest and the
// entries it was computed from.
func Sum(ctx context.Context, root string, jobs int) (digest.Digest, []Entry, error) {
	entries, err := Walk(ctx, root, jobs)
	if err != nil {
		return digest.Digest{}, nil, err
	}
	return Of(entries), entries, nil
}

// Walk lists every entry below the directory root, sorted by Path,
// hashing regular files with jobs parallel workers (jobs < 1 means
// GOMAXPROCS). Symbolic links are read, never followed; root itself must
// be a directory, not a link to one. A name that is not UTF-8, a device,
// FIFO or socket, or any I/O error is a *Error; cancelling ctx stops
// the walk with ctx's error.
func Walk(ctx context.Context, root string, jobs int) ([]Entry, error) {
	if jobs < 1 {
		jobs = runtime.GOMAXPROCS(0)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, &Error{Path: root, Reason: "cannot read the root", Err: err}
	}
	if !fi.IsDir() {
		return nil, &Error{Path: root, Reason: "root is not a directory (" + fi.Mode().Type().String() + ")", Err: ErrSpecialFile}
	}
	w := walker{ctx: ctx, root: root}
	if err := w.walk(); err != nil {
		return nil, err
	}
	entries := w.entries
	slices.SortFunc(entries, cmpEntry)
	files := w.files[:0]
	for i := range entries {
		if entries[i].Kind == File {
			files = append(files, i)
		}
	}
	if err := hashFiles(ctx, root, entries, files, jobs); err != nil {
		return nil, err
	}
	return entries, nil
}

// walker lists a tree depth-first without hashing file contents.
type walker struct {
	ctx     context.Context
	root    string
	entries []Entry
	files   []int // scratch, reused for the file indexes
}

func (w *walker) walk() error {
	stack := []string{""}
	for len(stack) > 0 {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		des, err := readDir(w.full(rel))
		if err != nil {
			return &Error{Path: relOrDot(rel), Reason: "cannot read the directory", Err: err}
		}
		for _, de := range des {
			name := de.Name()
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			if !utf8.ValidString(name) {
				return &Error{Path: p, Reason: "refusing a name that is not UTF-8", Err: ErrNonUTF8Name}
			}
			switch t := de.Type(); {
			case t.IsDir():
				w.entries = append(w.entries, Entry{Path: p, Kind: Dir})
				stack = append(stack, p)
			case t&fs.ModeSymlink != 0:
				target, err := os.Readlink(w.full(p))
				if err != nil {
					return &Error{Path: p, Reason: "cannot read the symlink", Err: err}
				}
				w.entries = append(w.entries, Entry{Path: p, Kind: Symlink, Size: int64(len(target)), SHA256: sha256.Sum256([]byte(target))})
			case t.IsRegular():
				w.entries = append(w.entries, Entry{Path: p, Kind: File})
			default:
				return &Error{Path: p, Reason: "refusing a " + kindName(t), Err: ErrSpecialFile}
			}
		}
	}
	return nil
}

func (w *walker) full(rel string) string {
	if rel == "" {
		return w.root
	}
	return filepath.Join(w.root, filepath.FromSlash(rel))
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

func kindName(t fs.FileMode) string {
	switch {
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "special file (" + t.String() + ")"
}

// hashFiles hashes entries[files[i]] with jobs workers, each with its own
// buffer and hash state, claiming work through an atomic counter.
func hashFiles(ctx context.Context, root string, entries []Entry, files []int, jobs int) error {
	if jobs > len(files) {
		jobs = len(files)
	}
	var (
		next    atomic.Int64
		stop    atomic.Bool
		mu      sync.Mutex
		first   error
		firstAt = len(entries)
		wg      sync.WaitGroup
	)
	for range jobs {
		wg.Go(func() {
			h := hasherPool.Get().(*fileHasher)
			defer hasherPool.Put(h)
			for !stop.Load() {
				n := int(next.Add(1) - 1)
				if n >= len(files) {
					return
				}
				e := &entries[files[n]]
				err := ctx.Err()
				if err == nil {
					e.SHA256, e.Size, e.Exec, err = h.hash(ctx, filepath.Join(root, filepath.FromSlash(e.Path)))
					var te *Error
					if errors.As(err, &te) {
						te.Path = e.Path
					}
				}
				if err != nil {
					stop.Store(true)
					mu.Lock()
					if files[n] < firstAt {
						first, firstAt = err, files[n]
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// HashFile returns the sha256 and size of the regular file at path, which
// is opened without following a symlink. Anything but a regular file is a
// *Error wrapping ErrSpecialFile; I/O errors are *Error too.
// It reuses buffers across calls, so hashing many small files one call at
// a time is cheap; it is safe for concurrent use.
func HashFile(path string) ([32]byte, int64, error) {
	h := hasherPool.Get().(*fileHasher)
	defer hasherPool.Put(h)
	sum, size, _, err := h.hash(context.Background(), path)
	return sum, size, err
}

var hasherPool = sync.Pool{New: func() any { return newFileHasher() }}

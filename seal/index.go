package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/treehash"
)

// StatIndexFormat is the first line of every stat index file.
const StatIndexFormat = "cruxprov.statindex/v1"

// Entry is one entry of the stat index: an entry below the env root with
// its kind, permission bits, size, timestamps, inode and content hash (the
// sha256 of a file's bytes or of a symlink's target; zero for a directory).
type Entry struct {
	Path    string // relative to the env root, '/'-separated
	Kind    treehash.Kind
	Mode    uint32 // permission bits (mode & 07777)
	Size    int64  // file length, or symlink target length; 0 for a directory
	MtimeNS int64
	CtimeNS int64
	Ino     uint64
	SHA256  [32]byte
}

// TreeEntry returns e as the tree digest sees it.
func (e *Entry) TreeEntry() treehash.Entry {
	return treehash.Entry{Path: e.Path, Kind: e.Kind, Exec: e.Kind == treehash.File && e.Mode&0o111 != 0, Size: e.Size, SHA256: e.SHA256}
}

// StatIndex is the stat index of a sealed env (named apart from the
// package index of the index package): every entry below the root,
// sorted by Path in byte order (the tree digest's order).
type StatIndex struct {
	Entries []Entry
}

// TreeDigest returns the tree digest (DESIGN §5) of the indexed entries.
// Sorted entries (as Freeze and ParseStatIndex return them) are hashed as they
// are read, each record written as treehash.Of writes it (a test
// holds the two equal), without a copy of the entries: fast verify runs
// this on every call, and a fresh copy's pages cost more than the hashing.
func (ix *StatIndex) TreeDigest() digest.Digest {
	if !slices.IsSortedFunc(ix.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
		te := make([]treehash.Entry, len(ix.Entries))
		for i := range ix.Entries {
			te[i] = ix.Entries[i].TreeEntry()
		}
		return treehash.Of(te)
	}
	h := sha256.New()
	buf := make([]byte, 0, 32<<10)
	for i := range ix.Entries {
		buf = appendTreeRecord(buf, &ix.Entries[i])
		if len(buf) > 28<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return digest.FromBytes(h.Sum(nil))
}

// appendTreeRecord appends e's tree-digest record (docs/digests.md).
func appendTreeRecord(b []byte, e *Entry) []byte {
	return treehash.AppendRecord(b, e.Kind, e.Mode&0o111 != 0, e.Size, &e.SHA256, e.Path)
}

// MarshalBinary encodes the index (docs/seal.md):
//
//	"cruxprov.statindex/v1\n"
//	uvarint count
//	count × { uvarint shared-prefix length with the previous path,
//	          uvarint suffix length, suffix bytes,
//	          kind byte 'F' | 'D' | 'L',
//	          uvarint mode, uvarint size, varint mtime_ns, varint ctime_ns,
//	          uvarint inode,
//	          32-byte sha256 (kinds F and L only) }
//
// Entries must be sorted and unique (as Freeze returns them).
func (ix *StatIndex) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+len(ix.Entries)*96)
	b = append(b, StatIndexFormat+"\n"...)
	b = binary.AppendUvarint(b, uint64(len(ix.Entries)))
	prev := ""
	for i := range ix.Entries {
		e := &ix.Entries[i]
		if i > 0 && e.Path <= prev {
			return nil, fmt.Errorf("stat index: entries not sorted or not unique at %q", e.Path)
		}
		n := sharedPrefix(prev, e.Path)
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(e.Path)-n))
		b = append(b, e.Path[n:]...)
		b = append(b, byte(e.Kind))
		b = binary.AppendUvarint(b, uint64(e.Mode))
		b = binary.AppendUvarint(b, uint64(e.Size))
		b = binary.AppendVarint(b, e.MtimeNS)
		b = binary.AppendVarint(b, e.CtimeNS)
		b = binary.AppendUvarint(b, e.Ino)
		if e.Kind != treehash.Dir {
			b = append(b, e.SHA256[:]...)
		}
		prev = e.Path
	}
	return b, nil
}

func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// errIndex is the cause of every malformed-index error.
var errIndex = errors.New("malformed stat index")

// ParseStatIndex decodes and validates a stat index: the format line, every
// field in range, paths valid (relative, '/'-separated, UTF-8, no empty,
// "." or ".." component), sorted and unique, no trailing bytes. An unknown
// format is an error naming it.
func ParseStatIndex(b []byte) (*StatIndex, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 64 {
		return nil, fmt.Errorf("%w: no format line", errIndex)
	}
	if f := string(b[:nl]); f != StatIndexFormat {
		return nil, fmt.Errorf("%w: format %q is not %q (written by another version of cruxprov?)", errIndex, f, StatIndexFormat)
	}
	r := reader{b: b, off: nl + 1}
	count := r.uvarint()
	// Every entry takes at least 9 bytes: a cheap bound before allocating.
	if r.err != nil || count > uint64(len(b)-r.off)/9 {
		return nil, fmt.Errorf("%w: bad entry count", errIndex)
	}
	ix := &StatIndex{Entries: make([]Entry, 0, count)}
	// Paths are built into one buffer and cut from one string at the end:
	// two allocations instead of one per entry.
	all := make([]byte, 0, len(b)*2)
	ends := make([]int, 0, count)
	prevStart, prevEnd := 0, 0
	for i := uint64(0); i < count; i++ {
		shared, suffix := r.uvarint(), r.uvarint()
		if r.err != nil || shared > uint64(prevEnd-prevStart) || suffix > uint64(len(b)-r.off) {
			return nil, fmt.Errorf("%w: entry %d: bad path lengths", errIndex, i)
		}
		start := len(all)
		all = append(all, all[prevStart:prevStart+int(shared)]...)
		all = append(all, r.bytes(int(suffix))...)
		p := all[start:]
		var e Entry
		e.Kind = treehash.Kind(r.byte1())
		mode := r.uvarint()
		size := r.uvarint()
		e.MtimeNS = r.varint()
		e.CtimeNS = r.varint()
		e.Ino = r.uvarint()
		if r.err != nil {
			return nil, fmt.Errorf("%w: entry %d (%q): truncated", errIndex, i, p)
		}
		switch e.Kind {
		case treehash.File, treehash.Symlink:
			copy(e.SHA256[:], r.bytes(32))
		case treehash.Dir:
			if size != 0 {
				return nil, fmt.Errorf("%w: directory %q has a size", errIndex, p)
			}
		default:
			return nil, fmt.Errorf("%w: entry %q has kind %q", errIndex, p, byte(e.Kind))
		}
		if r.err != nil {
			return nil, fmt.Errorf("%w: entry %d (%q): truncated", errIndex, i, p)
		}
		if mode > 0o7777 || size > 1<<62 {
			return nil, fmt.Errorf("%w: entry %q: mode or size out of range", errIndex, p)
		}
		e.Mode, e.Size = uint32(mode), int64(size)
		// The shared prefix is the previous path's, already checked: only
		// the component it ends in and what follows need checking, and the
		// order is decided after it.
		from := 0
		if i > 0 {
			from = bytes.LastIndexByte(p[:shared], '/') + 1
		}
		if !validPathFrom(p, from) {
			return nil, fmt.Errorf("%w: entry %d: invalid path %q", errIndex, i, p)
		}
		if i > 0 && bytes.Compare(p[shared:], all[prevStart+int(shared):prevEnd]) <= 0 {
			return nil, fmt.Errorf("%w: entries not sorted or not unique at %q", errIndex, p)
		}
		ix.Entries = append(ix.Entries, e)
		ends = append(ends, len(all))
		prevStart, prevEnd = start, len(all)
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", errIndex, len(b)-r.off)
	}
	// One string for every path (one copy of all; the paths share it).
	str := string(all)
	start := 0
	for i, end := range ends {
		ix.Entries[i].Path = str[start:end]
		start = end
	}
	return ix, nil
}

// validPathFrom is validPath for bytes whose p[:from] (whole components
// followed by '/', or nothing) is known to be valid.
func validPathFrom(p []byte, from int) bool {
	q := p[from:]
	if len(q) == 0 || q[len(q)-1] == '/' || !utf8.Valid(q) || bytes.IndexByte(q, 0) >= 0 {
		return false
	}
	for {
		c := q
		i := bytes.IndexByte(q, '/')
		if i >= 0 {
			c, q = q[:i], q[i+1:]
		}
		if len(c) == 0 || (len(c) == 1 && c[0] == '.') || (len(c) == 2 && c[0] == '.' && c[1] == '.') {
			return false
		}
		if i < 0 {
			return true
		}
	}
}

// validPath reports whether p is a clean relative '/'-separated UTF-8 path.
func validPath(p string) bool {
	if p == "" || !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = errIndex
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.err = errIndex
		return 0
	}
	r.off += n
	return v
}

func (r *reader) byte1() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errIndex
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b)-r.off {
		r.err = errIndex
		return nil
	}
	r.off += n
	return r.b[r.off-n : r.off]
}

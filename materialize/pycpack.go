package materialize

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// The pyc cache keeps one pack per wheel and interpreter:
// cache/pyc/<cache key hex>/<distribution>/<wheel file name>.pycs holds
// the placeholder pyc (or what else is known) of every source that wheel
// installed, found by the source's sha256. A create reads a wheel's pack
// once (its index) and each pyc with one pread; a create that compiled
// any of a wheel's sources writes the wheel's pack anew (the entries it
// read from the old one carried over) once the compiling is over: one
// file per wheel, not one per source, which on a cold cache was a third
// of the Go side's CPU (ext4 allocating an inode per entry, and a rename).
// A source its wheel's pack lacks (a wheel with no pack yet) is looked for
// in the packs of the distribution's other versions too (the newest few),
// so an upgrade compiles only the sources that changed.
//
// A pack, every integer little-endian:
//
//	"crxpycpk" | cache key (32) | the pycs, one after the other | index | n (4) | sha256 of everything but the pycs (32)
//
// The index is n records sorted by source sha256, no two alike:
//
//	source sha256 (32) | kind (1) | offset (8) | length (4) | CRC-32C of the pyc (4)
//
// Nothing is fsynced: a pack torn by a crash fails its index's checksum
// (and reads as absent), or a pyc its own (and that source is compiled
// again, and the pack rewritten). The pycs' checksums are CRC-32C: they
// are there to catch a torn or damaged write, not tampering (the cache is
// the store owner's, trusted as a sealed env is), and cost a tenth of a
// sha256.
const (
	pycPackMagic   = "crxpycpk"
	pycPackHeadLen = len(pycPackMagic) + 32
	pycPackRecLen  = 32 + 1 + 8 + 4 + 4
	pycPackTailLen = 4 + 32
	// pycPackExt ends the name of a pack.
	pycPackExt = ".pycs"
	// pycPackSiblings is how many packs of a distribution's other
	// versions a wheel without a pack searches (the newest).
	pycPackSiblings = 3
)

// Entry kinds.
const (
	pycKindPyc      = 'P' // the source compiled; its placeholder pyc is the entry
	pycKindNoSource = 'N' // the source does not compile (SyntaxError, …): no pyc, as pip
	pycKindDirect   = 'D' // the placeholder would not be its file name alone (it is in the source): compile it with its final path
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packEntry is one record of a pack's index.
type packEntry struct {
	kind byte
	off  int64
	n    uint32
	crc  uint32 // CRC-32C of the pyc
}

// pycPack is a pack open for reading.
type pycPack struct {
	f     *os.File
	path  string
	index map[[32]byte]packEntry // by source sha256
}

// openPycPack opens the pack at path and reads its index; an error means
// it is absent, unreadable or not a whole pack for key.
func openPycPack(path string, key [32]byte) (*pycPack, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0) // a FIFO there must not hang the create
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	var index map[[32]byte]packEntry
	if err == nil {
		index, err = readPackIndex(f, fi.Size(), key)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &pycPack{f: f, path: path, index: index}, nil
}

// readPackIndex reads and checks the index of a pack of size bytes.
func readPackIndex(r io.ReaderAt, size int64, key [32]byte) (map[[32]byte]packEntry, error) {
	if size < int64(pycPackHeadLen+pycPackTailLen) || size > 1<<40 {
		return nil, errors.New("not a pyc pack")
	}
	var tail [pycPackTailLen]byte
	if _, err := r.ReadAt(tail[:], size-pycPackTailLen); err != nil {
		return nil, err
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	start := size - pycPackTailLen - n*pycPackRecLen
	if start < int64(pycPackHeadLen) {
		return nil, errors.New("a pyc pack's index is longer than the pack")
	}
	meta := make([]byte, pycPackHeadLen+int(n)*pycPackRecLen+4)
	if _, err := r.ReadAt(meta[:pycPackHeadLen], 0); err != nil {
		return nil, err
	}
	if _, err := r.ReadAt(meta[pycPackHeadLen:], start); err != nil {
		return nil, err
	}
	if h := sha256.Sum256(meta); !bytes.Equal(h[:], tail[4:]) {
		return nil, errors.New("a pyc pack's index does not match its checksum")
	}
	if string(meta[:len(pycPackMagic)]) != pycPackMagic || !bytes.Equal(meta[len(pycPackMagic):pycPackHeadLen], key[:]) {
		return nil, errors.New("not a pyc pack of this interpreter")
	}
	index := make(map[[32]byte]packEntry, n)
	var prev [32]byte
	for i := range int(n) {
		rec := meta[pycPackHeadLen+i*pycPackRecLen:][:pycPackRecLen]
		src := [32]byte(rec[:32])
		e := packEntry{kind: rec[32], off: int64(binary.LittleEndian.Uint64(rec[33:41])), n: binary.LittleEndian.Uint32(rec[41:45]), crc: binary.LittleEndian.Uint32(rec[45:49])}
		switch {
		case i > 0 && bytes.Compare(src[:], prev[:]) <= 0:
			return nil, errors.New("a pyc pack's index is not sorted")
		case e.off < int64(pycPackHeadLen) || e.off > start || int64(e.n) > start-e.off:
			return nil, errors.New("a pyc pack's entry is outside its pycs")
		case e.kind == pycKindPyc && e.n >= pycHeaderLen:
		case (e.kind == pycKindNoSource || e.kind == pycKindDirect) && e.n == 0:
		default:
			return nil, fmt.Errorf("a pyc pack's entry of kind %q has %d bytes", e.kind, e.n)
		}
		index[src], prev = e, src
	}
	return index, nil
}

// read reads e's pyc into *bp (grown as needed) and checks it.
func (p *pycPack) read(e packEntry, bp *[]byte) ([]byte, error) {
	if cap(*bp) < int(e.n) {
		*bp = make([]byte, e.n)
	}
	b := (*bp)[:e.n]
	if _, err := p.f.ReadAt(b, e.off); err != nil {
		return nil, err
	}
	if crc32.Checksum(b, castagnoli) != e.crc {
		return nil, errors.New("a pyc pack's entry does not match its checksum")
	}
	return b, nil
}

func (p *pycPack) close() { p.f.Close() }

// packWriter writes a new pack, from several goroutines, to a temporary
// file that commit renames into place.
type packWriter struct {
	mu    sync.Mutex
	f     *os.File
	bw    *bufio.Writer
	off   int64
	index map[[32]byte]packEntry
	err   error // a failed write: the pack is not committed
}

// newPackWriter starts a pack for key in a temporary file of dir (in the
// store, so that it can be renamed into the cache; "" when the store
// cannot be written: no pack).
func newPackWriter(dir string, key [32]byte) (*packWriter, error) {
	if dir == "" {
		return nil, errors.New("no directory in the store for the pyc cache's packs")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	f, err := os.OpenFile(filepath.Join(dir, "pycs-"+hex.EncodeToString(rnd[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, err
	}
	// 0444 whatever the umask (docs/store.md), as the unpacked-wheel
	// cache's entries are: under umask 077 the open alone made it 0400.
	if err := f.Chmod(0o444); err != nil {
		f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	w := &packWriter{f: f, bw: bufio.NewWriterSize(f, 64<<10), index: map[[32]byte]packEntry{}}
	w.bw.WriteString(pycPackMagic)
	w.bw.Write(key[:])
	w.off = int64(pycPackHeadLen)
	return w, nil
}

// add adds the entry of source src (the first one for src wins).
func (w *packWriter) add(src [32]byte, kind byte, pyc []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.index[src]; ok || w.err != nil {
		return
	}
	if _, err := w.bw.Write(pyc); err != nil {
		w.err = err
		return
	}
	w.index[src] = packEntry{kind: kind, off: w.off, n: uint32(len(pyc)), crc: crc32.Checksum(pyc, castagnoli)}
	w.off += int64(len(pyc))
}

// has reports whether src has an entry.
func (w *packWriter) has(src [32]byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.index[src]
	return ok
}

// commit writes the index and renames the pack to path; on failure the
// pack is dropped (it only costs a compile next time).
func (w *packWriter) commit(path string, key [32]byte) error {
	srcs := make([][32]byte, 0, len(w.index))
	for s := range w.index {
		srcs = append(srcs, s)
	}
	sort.Slice(srcs, func(i, j int) bool { return bytes.Compare(srcs[i][:], srcs[j][:]) < 0 })
	meta := make([]byte, 0, pycPackHeadLen+len(srcs)*pycPackRecLen+4)
	meta = append(meta, pycPackMagic...)
	meta = append(meta, key[:]...)
	for _, s := range srcs {
		e := w.index[s]
		meta = append(meta, s[:]...)
		meta = append(meta, e.kind)
		meta = binary.LittleEndian.AppendUint64(meta, uint64(e.off))
		meta = binary.LittleEndian.AppendUint32(meta, e.n)
		meta = binary.LittleEndian.AppendUint32(meta, e.crc)
	}
	meta = binary.LittleEndian.AppendUint32(meta, uint32(len(srcs)))
	h := sha256.Sum256(meta)
	err := w.err
	if err == nil {
		_, err = w.bw.Write(meta[pycPackHeadLen:])
	}
	if err == nil {
		_, err = w.bw.Write(h[:])
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = os.Rename(w.f.Name(), path); errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				err = os.Rename(w.f.Name(), path)
			}
		}
	}
	if err != nil {
		_ = os.Remove(w.f.Name())
	}
	return err
}

// discard drops the pack.
func (w *packWriter) discard() {
	w.f.Close()
	_ = os.Remove(w.f.Name())
}

// siblingPacks opens the newest packs (at most pycPackSiblings) in dir
// other than the one named skip.
func siblingPacks(dir, skip string, key [32]byte) []*pycPack {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type cand struct {
		name  string
		mtime int64
	}
	var cs []cand
	for _, e := range ents {
		if e.Name() == skip || !e.Type().IsRegular() || filepath.Ext(e.Name()) != pycPackExt {
			continue
		}
		if fi, err := e.Info(); err == nil {
			cs = append(cs, cand{e.Name(), fi.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(b.mtime, a.mtime) })
	var out []*pycPack
	for _, c := range cs {
		if len(out) == pycPackSiblings {
			break
		}
		if p, err := openPycPack(filepath.Join(dir, c.name), key); err == nil {
			out = append(out, p)
		}
	}
	return out
}

package materialize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// The unpacked-wheel cache. Inflating members is most of the CPU an install
// spends (compress/flate gives about 200 MB/s per core), so the first
// install of a wheel also writes its members' uncompressed bytes,
// concatenated in archive order, to <home>/cache/unpacked-v1/<wheel sha256
// hex>, and later installs read them from there with pread.
//
// Nothing in the cache is trusted. The wheel itself is still hashed against
// the resolution and opened on every install (its RECORD is the reference),
// and every member read from the cache is hashed and compared with RECORD
// while it streams, exactly as a member inflated from the archive is. A
// mismatch means the entry is damaged (a torn write after a power loss, a
// bit flip, tampering): the entry is removed and the env is built again
// from the archives alone, so a damaged cache costs time, never an env.

// UnpackedCacheDir is the cache of unpacked wheels below the store's home.
const UnpackedCacheDir = store.UnpackedDir

// cacheSlot is where one wheel's members sit in its cache entry.
type cacheSlot struct {
	path    string           // the entry: <home>/cache/unpacked-v1/<hex>
	offsets map[string]int64 // member name → offset of its bytes
	total   int64            // the entry's size
	src     *os.File         // the entry, when it exists and has the right size
	tee     *teeFile         // the entry being written, when it does not
}

// teeFile is a cache entry being written by the members' readers at their
// offsets, from several goroutines; a failed write marks it broken, and a
// broken entry is never committed (the install goes on: the cache is an
// optimisation).
type teeFile struct {
	f      *os.File
	broken atomic.Bool
}

func (t *teeFile) writeAt(p []byte, off int64) {
	if t.broken.Load() {
		return
	}
	if _, err := t.f.WriteAt(p, off); err != nil {
		t.broken.Store(true)
	}
}

// cacheDamaged is the error of a member whose bytes in the cache differ
// from RECORD. Create removes the entry and builds again without the cache.
type cacheDamaged struct {
	entry string
	err   error
}

func (e *cacheDamaged) Error() string {
	return fmt.Sprintf("the unpacked-wheel cache entry %s is damaged: %v", e.entry, e.err)
}

func (e *cacheDamaged) Unwrap() error { return e.err }

// damagedEntries checks the unpacked-cache entry of every wheel of pkgs
// that has one against the wheel's RECORD, each member hashed as an
// install reads it, and returns the entries that are damaged: of the
// wrong size, or with a member whose bytes differ. An entry that cannot
// be opened, or whose wheel cannot be (the build refuses that), is left
// out: the install does not read it either. It runs once a create has
// met one damaged entry, so that every damaged entry goes in that create
// (one at a time, each create found the next).
func damagedEntries(ctx context.Context, st *store.Store, pkgs []lockfile.ResolvedWheel, jobs int) []*cacheDamaged {
	found := make([]*cacheDamaged, len(pkgs))
	dir := filepath.Join(st.Home(), filepath.FromSlash(UnpackedCacheDir))
	_ = parallel(ctx, len(pkgs), jobs, func(i int) error {
		p := pkgs[i]
		path := filepath.Join(dir, p.SHA256.Hex())
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		bf, size, err := st.OpenVerified(p.SHA256, p.Filename)
		if err != nil {
			return nil
		}
		defer bf.Close()
		w, err := readWheel(bf, size, p)
		if err != nil {
			return nil
		}
		s := slotOf(w, path)
		if fi.Size() != s.total {
			found[i] = &cacheDamaged{entry: path, err: fmt.Errorf("%d bytes, the wheel's members are %d", fi.Size(), s.total)}
			return nil
		}
		rec := w.DistInfo() + "/RECORD"
		for _, m := range w.Files() {
			if m.Name == rec {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			r := wheel.NewMemberReader(io.NewSectionReader(f, s.offsets[m.Name], m.Size), m)
			_, err := io.Copy(io.Discard, r)
			r.Close()
			if err != nil {
				// Not the wheel's fault (it is the reference): said as the
				// cache's, not as the refusal's "treat the wheel as tampered".
				found[i] = &cacheDamaged{entry: path, err: fmt.Errorf("its copy of %s differs from the wheel's RECORD", m.Name)}
				return nil
			}
		}
		return nil
	})
	var bad []*cacheDamaged
	for _, d := range found {
		if d != nil {
			bad = append(bad, d)
		}
	}
	return bad
}

// buildAgainIfDamaged runs b; where it met a damaged unpacked-cache
// entry, every damaged entry of req's wheels goes (discardDamaged, a
// warning each, not one per create), scratch (the staging directory, or
// the tree) is emptied, and b runs again without the cache: from the
// archives alone. Create and Tree build through it.
func buildAgainIfDamaged(ctx context.Context, st *store.Store, req Request, jobs int, scratch string, b func(req Request) error) error {
	err := b(req)
	var damaged *cacheDamaged
	if !errors.As(err, &damaged) || ctx.Err() != nil {
		return err
	}
	if err := discardDamaged(ctx, st, req.wheels(), damaged, jobs, req.warn); err != nil {
		return err
	}
	if err = removeTree(scratch); err == nil {
		err = os.Mkdir(scratch, 0o700)
	}
	if err != nil {
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot start again after a damaged cache entry %s; remove %s and retry", damaged.entry, filepath.Join(st.Home(), UnpackedCacheDir))
	}
	req.NoCache = true
	return b(req)
}

// discardDamaged removes the damaged cache entry first, which a build
// met, and every other damaged entry of pkgs (damagedEntries), warning
// about each.
func discardDamaged(ctx context.Context, st *store.Store, pkgs []lockfile.ResolvedWheel, first *cacheDamaged, jobs int, warn func(string)) error {
	bad := damagedEntries(ctx, st, pkgs, jobs)
	if !slices.ContainsFunc(bad, func(d *cacheDamaged) bool { return d.entry == first.entry }) {
		bad = append([]*cacheDamaged{first}, bad...)
	}
	for _, d := range bad {
		if err := os.Remove(d.entry); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return refusal.Wrap(refusal.MaterializeFailed, err, "cannot remove the damaged unpacked-wheel cache entry %s; remove %s and retry", d.entry, filepath.Dir(d.entry))
		}
		warn(d.Error() + "; removed it: the env is built from the wheels, and the next create writes it again")
	}
	return nil
}

// slotOf lays out w's members (all but RECORD, which is regenerated) in
// archive order.
func slotOf(w *wheel.Wheel, path string) *cacheSlot {
	s := &cacheSlot{path: path, offsets: map[string]int64{}}
	rec := w.DistInfo() + "/RECORD"
	for _, f := range w.Files() {
		if f.Name == rec {
			continue
		}
		s.offsets[f.Name] = s.total
		s.total += f.Size
	}
	return s
}

// attachCache gives an opened wheel its cache slot: the entry to read
// when it exists with the right size, else a temp file in tmpDir (a
// staging directory of the store, removed with it) to fill while
// the wheel is installed from its archive (none when tmpDir is "": a
// store this process cannot write). An entry of the wrong size, or that
// is not a regular file (a symbolic link, a named pipe, a directory), is
// damaged or was put there: it is removed, with a warning naming it and
// what was wrong, as an entry whose bytes differ from RECORD is
// (discardDamaged); it was replaced silently. An unreadable one (a store
// of another user's) is left alone and not used. One of the right size
// whose mode is not 0444 (made writable: the cache writes every entry
// read-only) is set back to 0444 and used, with a warning saying so: its
// bytes are checked against RECORD as they are read, as any entry's, so
// it is no less sound than another, and a damaged one is discarded then;
// one this process cannot set back is removed as a damaged one is (it
// was used silently).
func attachCache(home, tmpDir string, o *opened, p lockfile.ResolvedWheel, warn func(string)) error {
	dir := filepath.Join(home, filepath.FromSlash(UnpackedCacheDir))
	s := slotOf(o.w, filepath.Join(dir, p.SHA256.Hex()))
	f, err := os.OpenFile(s.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0) // a FIFO there must not hang the create
	var wrong string
	switch {
	case err == nil:
		var st unix.Stat_t
		ferr := unix.Fstat(int(f.Fd()), &st)
		switch {
		case ferr == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == s.total && st.Mode&07777 == 0o444:
			s.src = f
			o.cache = s
			return nil
		case ferr == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == s.total:
			mode := fmt.Sprintf("mode %04o, not the 0444 the cache writes", st.Mode&07777)
			if cerr := unix.Fchmod(int(f.Fd()), 0o444); cerr != nil {
				wrong = mode + ", and it cannot be set back (" + cerr.Error() + ")"
				break
			}
			warn(fmt.Sprintf("the unpacked-wheel cache entry %s had %s; set it back to 0444: its bytes are checked against the wheel's RECORD as they are read", s.path, mode))
			s.src = f
			o.cache = s
			return nil
		case ferr != nil:
			wrong = "cannot be stat'ed: " + ferr.Error()
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			wrong = "not a regular file but " + kindOf(f)
		default:
			wrong = fmt.Sprintf("%d bytes, the wheel's members are %d", st.Size, s.total)
		}
		f.Close()
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW: a symbolic link, which the cache never writes.
		wrong = "not a regular file but a symbolic link"
	case !errors.Is(err, fs.ErrNotExist):
		return nil // unreadable: install from the archive, write nothing
	}
	if wrong != "" {
		d := &cacheDamaged{entry: s.path, err: errors.New(wrong)}
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			warn(d.Error() + "; cannot remove it (" + rerr.Error() + "): the env is built from the wheel")
			return nil
		}
		warn(d.Error() + "; removed it: the env is built from the wheel, which writes it again")
	}
	if tmpDir == "" {
		return nil
	}
	t, err := os.CreateTemp(tmpDir, "unpacked-"+p.SHA256.Hex()[:16]+"-*")
	if err != nil {
		return err
	}
	if err := t.Truncate(s.total); err != nil {
		t.Close()
		return err
	}
	s.tee = &teeFile{f: t}
	o.cache = s
	return nil
}

// kindOf names the type of the open file f, which is not a regular one
// (filekind.Of).
func kindOf(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return "not a regular file"
	}
	return filekind.Of(fi.Mode())
}

// commitCache renames every complete, unbroken temp entry into the cache
// (read-only). Failures leave the cache without that entry: the install
// itself succeeded.
func commitCache(home string, ws []opened) {
	dir := filepath.Join(home, filepath.FromSlash(UnpackedCacheDir))
	made := false
	for _, o := range ws {
		s := o.cache
		if s == nil || s.tee == nil || s.tee.broken.Load() {
			continue
		}
		if !made {
			if os.MkdirAll(dir, 0o755) != nil {
				return
			}
			made = true
		}
		if s.tee.f.Chmod(0o444) == nil {
			_ = os.Rename(s.tee.f.Name(), s.path)
		}
	}
}

// closeCache closes the slots' files (temp entries not committed are
// removed with the staging directory).
func closeCache(ws []opened) {
	for _, o := range ws {
		if s := o.cache; s != nil {
			if s.src != nil {
				s.src.Close()
			}
			if s.tee != nil {
				s.tee.f.Close()
			}
		}
	}
}

// cachedMember is a member whose bytes were read from a cache entry in
// one piece (with the rest of its batch, readBatch). They are hashed and
// compared with RECORD before the first byte is handed out, so nothing
// unverified is ever written; WriteTo writes them in one call.
type cachedMember struct {
	f     wheel.File
	data  []byte
	entry string
	off   int
	done  bool
	err   error
}

func (m *cachedMember) verify() error {
	if m.done {
		return m.err
	}
	m.done = true
	// Through the wheel's verifying reader, reading the bytes onto
	// themselves: one pass hashes them and nothing is copied.
	r := wheel.NewMemberReader(bytes.NewReader(m.data), m.f)
	var end [1]byte
	for p := m.data; ; {
		if len(p) == 0 {
			p = end[:]
		}
		n, err := r.Read(p)
		p = p[n:]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			m.err = &cacheDamaged{entry: m.entry, err: err}
			return m.err
		}
	}
}

// Read implements io.Reader.
func (m *cachedMember) Read(p []byte) (int, error) {
	if err := m.verify(); err != nil {
		return 0, err
	}
	if m.off >= len(m.data) {
		return 0, io.EOF
	}
	n := copy(p, m.data[m.off:])
	m.off += n
	return n, nil
}

// WriteTo implements io.WriterTo: io.Copy into a file is one write.
func (m *cachedMember) WriteTo(w io.Writer) (int64, error) {
	if err := m.verify(); err != nil {
		return 0, err
	}
	n, err := w.Write(m.data[m.off:])
	m.off += n
	return int64(n), err
}

// Close implements io.Closer.
func (m *cachedMember) Close() error { return nil }

// maxBatchRead bounds what one pread of a batch's members reads; a batch
// beyond it (a big member) streams each member (openCached).
const maxBatchRead = 4 << 20

// readBatch reads the cached bytes of a batch's members (consecutive
// members of one wheel: contiguous in its entry) with one pread into the
// worker's buffer buf (grown to the biggest batch it read: a pool would
// hand out fresh pages after every GC, and each costs a fault) and gives
// each task its slice until release. A batch that is not in the cache or
// is too big is left to stream.
func readBatch(b []task, buf *[]byte) (release func(), err error) {
	c := b[0].cache
	if c == nil || c.src == nil {
		return func() {}, nil
	}
	last := b[len(b)-1]
	lo := c.offsets[b[0].f.Name]
	hi := c.offsets[last.f.Name] + last.f.Size
	if hi-lo > maxBatchRead || hi-lo == 0 {
		return func() {}, nil
	}
	if int64(cap(*buf)) < hi-lo {
		*buf = make([]byte, hi-lo)
	}
	data := (*buf)[:hi-lo]
	if _, err := c.src.ReadAt(data, lo); err != nil {
		return nil, &cacheDamaged{entry: c.path, err: err}
	}
	for i := range b {
		off := c.offsets[b[i].f.Name] - lo
		b[i].data = data[off : off+b[i].f.Size]
	}
	return func() {
		for i := range b {
			b[i].data = nil
		}
	}, nil
}

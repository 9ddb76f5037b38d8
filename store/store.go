// Package store owns the on-disk store of DESIGN §6 under $CRUXPROV_HOME:
// its layout, content-addressed blobs (blobs/sha256/<hex>, verified while
// written, then fsynced, renamed into place and made read-only), the
// store lock that coordinates processes (flock), staging areas whose
// debris a later run removes, and garbage collection (GC).
//
// It does not fetch anything (fetch/ does), build or seal environments
// (materialize/ does), or decide what an accepted pin is: GC keeps what
// the files under envs/ and registry/ name, by the contract written in
// docs/store.md.
package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/flock"
	"github.com/cruxible/cruxprov/internal/verifying"
	"github.com/cruxible/cruxprov/refusal"
)

// The store's top-level entries (DESIGN §6).
const (
	BlobsDir    = "blobs/sha256"
	EnvsDir     = "envs"
	OCIDir      = "oci"
	RegistryDir = "registry"
	ReceiptsDir = "receipts"
	TmpDir      = "tmp"
	lockName    = ".lock"
	gateName    = ".gate"
	tempPrefix  = ".tmp-"
)

// Store is an opened store. Its methods are safe for concurrent use, and
// several processes may use one store at once.
type Store struct {
	home  string
	blobs groupSync // fsyncs of blobs/sha256, shared by concurrent Puts
	// existing: opened by OpenExisting, which makes nothing (its locks
	// do not make the lock file either).
	existing bool
	// waiting, when set (OnWait), is told what a lock call waits for.
	waiting func(Wait, []int)
}

// Wait is what a lock call of the store has to wait for (OnWait).
type Wait int

const (
	// WaitForGC: a gc (or env remove) holds the store exclusive.
	WaitForGC Wait = iota + 1
	// WaitBehindGC: a gc (or env remove) waits for the store and holds
	// its gate: a new taker waits behind it, until it has had the store.
	WaitBehindGC
	// WaitForUsers: an exclusive taker waits for the processes that
	// hold the store (runs, fetches, installs, …, or another gc).
	WaitForUsers
)

// String says what w waits for, so that an OnWait callback that logs it
// with %v (docs/executor.md's example) says something: before, it logged
// "waiting for the store: 2 [8451]".
func (w Wait) String() string {
	switch w {
	case WaitForGC:
		return "a gc (or env remove) is using the store"
	case WaitBehindGC:
		return "a gc that waits (or env remove) waits for the store and goes first"
	case WaitForUsers:
		return "the processes using the store are to finish first"
	}
	return "Wait(" + strconv.Itoa(int(w)) + ")"
}

// OnWait sets f to be called, once, by each lock call of s that has to
// wait (LockShared, LockExclusive; never the Try forms), before it
// waits, with what it waits for and the processes that hold what it
// waits on (their pids, as /proc/locks names them; none where it cannot
// tell): a command can say why it waits, and for whom. Call it before s
// is used.
func (s *Store) OnWait(f func(w Wait, pids []int)) { s.waiting = f }

// flockHolders returns the pids that hold a flock on f (only exclusive
// ones when writers), as /proc/locks lists them; nil when it cannot be
// read.
func flockHolders(f *os.File, writers bool) []int {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	return parseFlockHolders(b, unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), uint64(st.Ino), writers)
}

// parseFlockHolders reads /proc/locks (b) for the pids holding a flock
// on the file of device major:minor and inode ino (only exclusive ones
// when writers), sorted, each once. A blocked waiter's line (with "->"
// after its number) holds nothing; a process in another pid namespace
// is listed as 0 and left out.
func parseFlockHolders(b []byte, major, minor uint32, ino uint64, writers bool) []int {
	id := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	var pids []int
	for line := range strings.SplitSeq(string(b), "\n") {
		// "1: FLOCK  ADVISORY  WRITE 807 fe:00:10077025 0 EOF"
		fl := strings.Fields(line)
		if len(fl) < 6 || fl[1] != "FLOCK" || fl[5] != id || writers && fl[3] != "WRITE" {
			continue
		}
		if pid, err := strconv.Atoi(fl[4]); err == nil && pid > 0 && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// Holds reports whether the directory home holds a store: the lock file
// Open makes, or a directory of its layout. A command that would make a
// store's layout to collect or repair nothing asks first, so that a
// --home naming some other directory (a typo, the user's own home) is
// not filled with a store's.
func Holds(home string) bool {
	for _, name := range []string{lockName, BlobsDir, EnvsDir, OCIDir, RegistryDir, ReceiptsDir, TmpDir, "config.yaml"} {
		if _, err := os.Lstat(filepath.Join(home, name)); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// OpenExisting opens the store at home as Open does, but makes nothing:
// no directory of its layout, no lock file (a lock taken on a store
// without one holds nothing: no process ever locked it). For the
// commands that only read (gc --dry-run). A home that is not there is
// an error wrapping fs.ErrNotExist; one that is not a directory, one
// wrapping syscall.ENOTDIR.
func OpenExisting(home string) (*Store, error) {
	if home == "" {
		return nil, errors.New("store: no home directory given")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", home, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("store %s: %w", abs, unix.ENOTDIR)
	}
	st := &Store{home: abs, existing: true}
	st.blobs.dir = filepath.Join(abs, BlobsDir)
	st.blobs.cond = sync.NewCond(&st.blobs.mu)
	return st, nil
}

// openLock opens the store's lock file (name: lockName) or its gate
// (gateName), making it unless the store was opened by OpenExisting;
// nil, nil when that store has none. A gate this user cannot make is
// none too (Open makes it; a store made before the gate was added, which
// only its owner can give one).
func (s *Store) openLock(name string) (*os.File, error) {
	flag := os.O_RDONLY | os.O_CREATE
	if s.existing {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(filepath.Join(s.home, name), flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) && (s.existing || name == gateName) {
		return nil, nil
	}
	if name == gateName && err != nil && readOnly(s.home, err) {
		return nil, nil
	}
	return f, err
}

// Open opens the store at home, creating its layout when missing. In an
// existing store this user cannot write (an executor reading an
// operator's), a missing part it cannot make is left missing: reading
// goes on, and whatever needs that part fails when it is used.
func Open(home string) (*Store, error) {
	if home == "" {
		return nil, errors.New("store: no home directory given")
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", home, err)
	}
	for _, d := range []string{BlobsDir, EnvsDir, OCIDir, RegistryDir, ReceiptsDir, TmpDir} {
		if err := atomicfile.MkdirAll(filepath.Join(abs, d), 0o755); err != nil && !readOnly(abs, err) {
			return nil, fmt.Errorf("store %s: %w", abs, err)
		}
	}
	// The lock file and the gate too are the executors': 0644 whatever
	// the umask.
	for _, name := range []string{lockName, gateName} {
		f, err := os.OpenFile(filepath.Join(abs, name), os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			err = f.Chmod(0o644)
			f.Close()
		} else if errors.Is(err, fs.ErrExist) || readOnly(abs, err) {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("store %s: lock file: %w", abs, err)
		}
	}
	st := &Store{home: abs}
	st.blobs.dir = filepath.Join(abs, BlobsDir)
	st.blobs.cond = sync.NewCond(&st.blobs.mu)
	return st, nil
}

// readOnly reports whether err is this user's lack of write access (or a
// read-only file system) in a store whose home exists.
func readOnly(home string, err error) bool {
	if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, unix.EROFS) {
		return false
	}
	fi, serr := os.Stat(home)
	return serr == nil && fi.IsDir()
}

// Home returns the store's absolute root directory.
func (s *Store) Home() string { return s.home }

// Path returns where the blob named d lives (whether or not it is there).
func (s *Store) Path(d digest.Digest) string {
	return filepath.Join(s.home, BlobsDir, d.Hex())
}

// Has reports whether a blob named d is in the store, and its size,
// without checking its bytes (Check does).
func (s *Store) Has(d digest.Digest) (bool, int64) {
	if d.IsZero() {
		return false, 0
	}
	fi, err := os.Lstat(s.Path(d))
	if err != nil || !fi.Mode().IsRegular() {
		return false, 0
	}
	return true, fi.Size()
}

// Unlock releases a lock taken by LockShared or LockExclusive.
type Unlock func()

// LockShared takes the store lock shared: every process that reads or
// writes blobs or envs holds it, so GC (which takes it exclusive) never
// runs beside them. It first passes the store's gate (shared, released
// once the store lock is held): while a gc waits for the store it holds
// the gate, so a new taker waits behind it rather than starve it. A
// taker in a process that already holds the store shared does not pass
// the gate (an install holds the store and its fetch and creates take
// it again: held up at the gate, they would wait for a gc that waits
// for them). It waits until ctx is done (a *WaitError wrapping ctx.Err(),
// never a refusal); a lock that cannot be taken is materialize_failed.
func (s *Store) LockShared(ctx context.Context) (Unlock, error) {
	u, err := s.lock(ctx, unix.LOCK_SH)
	switch {
	case err == nil:
		return u, nil
	case ctx.Err() != nil:
		return nil, err // a *WaitError
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS):
		// Every reader takes it: a lock file missing (where this user
		// cannot make it) or unreadable stops them all, and only the
		// store's owner can mend it. Which, the lock's stat says.
		lock := filepath.Join(s.home, lockName)
		_, serr := os.Stat(lock)
		switch {
		case errors.Is(serr, fs.ErrPermission):
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock the store %s: this user (uid %d) cannot enter it (its mode or a parent's: a store's directories are 0755 for the executors that read it); as its owner, chmod 755 it", s.home, os.Geteuid())
		case errors.Is(serr, fs.ErrNotExist) && errors.Is(err, unix.EROFS):
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock the store %s: its lock file %s is missing and the store's file system is read-only; remount it read-write once and run any cruxprov command on it as its owner (that makes the lock)", s.home, lock)
		case errors.Is(serr, fs.ErrNotExist):
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock the store %s: its lock file %s is missing and this user (uid %d) cannot make it; as the store's owner, run any cruxprov command on it (that makes the lock)", s.home, lock, os.Geteuid())
		}
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock the store %s: its lock file %s is not readable by this user (uid %d); as the store's owner, chmod 644 %s", s.home, lock, os.Geteuid(), lock)
	default:
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock the store %s", s.home)
	}
}

// TryLockShared takes the store lock shared as LockShared does if it
// need not wait (no gc holds the store or waits for it), and reports
// false otherwise: a caller can say it waits before LockShared.
func (s *Store) TryLockShared() (Unlock, bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u, err := s.lock(ctx, unix.LOCK_SH)
	if errors.Is(err, context.Canceled) {
		return nil, false, nil
	}
	return u, err == nil, err
}

// LockExclusive takes the store lock exclusive (GC does), waiting until
// every shared holder is gone or ctx is done. It holds the store's gate
// while it waits: the processes that take the store after it began to
// wait wait behind it, so it gets the store once those that held it
// then are done, however much later takers overlap. A wait ctx ends is
// a *WaitError.
func (s *Store) LockExclusive(ctx context.Context) (Unlock, error) { return s.lock(ctx, unix.LOCK_EX) }

// TryLockExclusive takes the store lock exclusive if no process holds it,
// and reports false otherwise.
func (s *Store) TryLockExclusive() (Unlock, bool, error) {
	f, err := s.openLock(lockName)
	if err != nil {
		return nil, false, err
	}
	if f == nil {
		return func() {}, true, nil
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}

// sharedHeld counts, for each store lock file (by its device and inode),
// the shared store locks this process holds: a nested LockShared does
// not pass the gate.
var sharedHeld struct {
	sync.Mutex
	n map[fileID]int
}

type fileID struct{ dev, ino uint64 }

func idOf(f *os.File) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, nil
}

func (s *Store) lock(ctx context.Context, how int) (Unlock, error) {
	f, err := s.openLock(lockName)
	if err != nil {
		return nil, fmt.Errorf("store lock: %w", err)
	}
	if f == nil {
		return func() {}, nil
	}
	id, err := idOf(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store lock: %w", err)
	}
	said := false
	blocked := func(w Wait, on *os.File) func() {
		return func() {
			if !said && s.waiting != nil {
				said = true
				s.waiting(w, flockHolders(on, w != WaitForUsers))
			}
		}
	}
	gated := true
	if how == unix.LOCK_SH {
		sharedHeld.Lock()
		gated = sharedHeld.n[id] == 0
		sharedHeld.Unlock()
	}
	if gated {
		// The gate: exclusive for a waiting gc, shared for the others
		// (passed, not held). A store without one (made before it was
		// added, and this user cannot make it) has no gate: a gc
		// there waits as before, and nothing else changes.
		g, err := s.openLock(gateName)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, fmt.Errorf("store lock: %w", err)
		}
		if g != nil {
			defer g.Close()   // a gc waits with it; once it holds the store, the gate is let go
			w := WaitBehindGC // a shared taker's gate is held by a waiting gc
			if how != unix.LOCK_SH {
				w = WaitForUsers // another waiting gc, or a taker passing it
			}
			if err := flockWait(ctx, g, how, blocked(w, g)); err != nil {
				f.Close()
				return nil, s.waitErr(ctx, err)
			}
		}
	}
	w := WaitForGC // a shared taker's store is held by a gc
	if how != unix.LOCK_SH {
		w = WaitForUsers
	}
	if err := flockWait(ctx, f, how, blocked(w, f)); err != nil {
		f.Close()
		return nil, s.waitErr(ctx, err)
	}
	if how != unix.LOCK_SH {
		return func() { f.Close() }, nil
	}
	sharedHeld.Lock()
	if sharedHeld.n == nil {
		sharedHeld.n = map[fileID]int{}
	}
	sharedHeld.n[id]++
	sharedHeld.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			sharedHeld.Lock()
			if sharedHeld.n[id]--; sharedHeld.n[id] <= 0 {
				delete(sharedHeld.n, id)
			}
			sharedHeld.Unlock()
			f.Close()
		})
	}, nil
}

// flockWait takes f's flock (how), polling without blocking so that ctx
// can end the wait; blocked is called each time it has to wait (not when
// ctx is done already: TryLockShared's cancelled ctx never waits).
// WaitError is a lock call of the store (LockShared, LockExclusive) that
// ctx ended while it waited for other processes to let the store go:
// nothing was done under the lock. Err is ctx's error: context.Canceled
// for an interruption (a signal), context.DeadlineExceeded for a bound
// the caller put on the wait (a run's timeout: package pinned).
type WaitError struct {
	Home string
	Err  error
}

func (e *WaitError) Error() string {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("gave up waiting for the store %s: other processes held it past the deadline", e.Home)
	}
	return fmt.Sprintf("interrupted while waiting for the store %s, which other processes held", e.Home)
}

// Unwrap returns ctx's error.
func (e *WaitError) Unwrap() error { return e.Err }

// waitErr is err of a lock wait: a *WaitError when ctx ended it.
func (s *Store) waitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return &WaitError{Home: s.home, Err: ctx.Err()}
	}
	return err
}

func flockWait(ctx context.Context, f *os.File, how int, blocked func()) error {
	err := flock.Wait(ctx, int(f.Fd()), how, blocked)
	if err != nil && err != ctx.Err() {
		return fmt.Errorf("store lock: %w", err)
	}
	return err
}

// Put stores the bytes r yields as the blob d: Write, then Commit. More or
// fewer than size bytes (when size > 0; more than MaxUnsized when size is
// not given) is size_mismatch, other bytes than d is hash_mismatch, a zero
// d is hash_missing, and nothing is stored. A blob already present with
// the right bytes (Check) is kept and r is not read; a damaged one is
// replaced. A full disk is a *SpaceError. Errors of r are returned wrapped, so a caller
// can tell a transport failure (worth a retry) from a refusal.
func (s *Store) Put(ctx context.Context, d digest.Digest, size int64, r io.Reader) error {
	p, err := s.Write(ctx, d, size, r)
	if err != nil {
		return err
	}
	return s.Commit(ctx, []*Pending{p})
}

// Pending is a verified blob in its owner-locked temp file beside its
// final name: neither durable nor visible until Commit, removed by
// Discard (and, after a crash, by the next CleanStaging).
type Pending struct {
	d    digest.Digest
	size int64
	f    *os.File // nil when the blob was present already
	path string   // the final name
	// ingested is a Pending of Ingest: its temp is kept (the caller reads
	// it) even when the blob is present, and Commit keeps that blob.
	ingested bool
	// unnamed is an Ingest into a store this user cannot write (why, the
	// *WriteError that said so): its
	// copy has no name (outside the store), and Commit cannot store it.
	unnamed bool
	why     *WriteError
	// stored is an Ingest whose copy did not fit on the store's disk, of
	// bytes the store has already as a verified blob: f is that blob,
	// open read-only, which Discard closes and never removes.
	stored bool
}

// Digest returns the blob's name.
func (p *Pending) Digest() digest.Digest { return p.d }

// Size returns the blob's size in bytes.
func (p *Pending) Size() int64 { return p.size }

// ReadAt reads the pending bytes (io.ReaderAt) from the temp file, until
// Commit or Discard: the bytes that were hashed, which Commit stores. A
// Pending without a temp (Write's of a blob present already) has none
// (os.ErrClosed).
func (p *Pending) ReadAt(b []byte, off int64) (int, error) {
	if p.f == nil {
		return 0, os.ErrClosed
	}
	return p.f.ReadAt(b, off)
}

// Discard removes the temp file; the blob is not stored. Safe to repeat.
func (p *Pending) Discard() {
	if p.f != nil {
		if !p.unnamed && !p.stored {
			os.Remove(p.f.Name())
		}
		p.f.Close()
		p.f = nil
	}
}

// Write checks the bytes r yields while writing them to a temp file beside
// the blob d, as Put does, and returns them pending: a caller stores many
// blobs with one Commit, so their fsyncs share journal commits. A blob
// already present gives a Pending that Commit skips. On error nothing is
// left behind.
func (s *Store) Write(ctx context.Context, d digest.Digest, size int64, r io.Reader) (_ *Pending, err error) {
	want := verifying.Want{SHA256: d, Size: size}
	if size <= 0 {
		// No size given: the hash decides, but a source must not be able
		// to fill the disk first.
		want = verifying.Want{SHA256: d, Size: verifying.SizeUnknown, Max: MaxUnsized}
	}
	vr, err := verifying.NewReader(r, want)
	if err != nil {
		return nil, refusal.Wrap(refusal.HashMissing, verifying.ErrHashMissing, "a blob needs a sha256 to be stored")
	}
	// A blob present with the right bytes is kept; a damaged one was
	// removed by Check and is written anew.
	ok, have, err := s.Check(d)
	if de := (*DamagedError)(nil); errors.As(err, &de) && de.RemoveErr != nil {
		return nil, &WriteError{Dir: s.home, Op: "removing the damaged blob " + d.Hex()[:12], Err: err,
			Hint: "remove it as the store's owner, then fetch again (a blob whose bytes are not the ones its name says: a failing disk, or a write to the store, to look into)"}
	} else if err != nil && de == nil {
		return nil, &WriteError{Dir: s.home, Op: "reading blob " + d.Hex()[:12], Err: err}
	}
	if ok {
		if size > 0 && have != size {
			return nil, refusal.New(refusal.SizeMismatch, "blob %s in the store has %d bytes, the lock says %d; fix the lock's size", d, have, size)
		}
		return &Pending{d: d, size: have, path: s.Path(d)}, nil
	}
	var src io.Reader = vr
	var room *roomReader
	if size <= 0 {
		// Nor may it fill the disk below the cap: other writers of the
		// disk (and this store's other downloads) need it too.
		room = newRoomReader(vr, filepath.Join(s.home, BlobsDir))
		src = room
	}
	f, n, err := s.writeTemp(ctx, d.Hex(), "writing blob "+d.Hex()[:12], src)
	var mismatch *verifying.Error
	switch {
	case room != nil && errors.Is(err, errNoRoom):
		return nil, refusal.Wrap(refusal.SizeMismatch, err, "%d bytes for blob %s and no end yet, with no size given: a blob without a size may take half of the %d bytes that were free on the store's file system when it began, no more; lock it with its size", n, d, room.free)
	case errors.As(err, &mismatch) && mismatch.Over() && size <= 0:
		return nil, refusal.Wrap(refusal.SizeMismatch, mismatch, "more than %d bytes for blob %s and no size was given; lock it with its size", int64(MaxUnsized), d)
	// The detail opens with the mismatch (the cause, said once: it was
	// said again after the detail) and ends with what to do: which of the
	// two is wrong is not known here, the bytes or the lock.
	case mismatch != nil && mismatch.SizeDiffers():
		return nil, refusal.Wrap(refusal.SizeMismatch, mismatch, "%v (the lock's size, of blob %s); the index serves other bytes than were locked, or the lock's size is wrong (%s)", mismatch, d, relock)
	case mismatch != nil:
		return nil, refusal.Wrap(refusal.HashMismatch, mismatch, "%v (the lock's); the index serves other bytes than were locked, or the lock's hash is wrong (%s)", mismatch, relock)
	case err != nil:
		return nil, err // the store's (classified by writeTemp), ctx's or the reader's
	}
	return &Pending{d: d, size: n, f: f, path: s.Path(d)}, nil
}

// Ingest writes the bytes r yields, to its end, to a temp file beside the
// blobs (as Write does), hashing them as they are written, and returns
// them pending under the digest they hash to: it stores bytes whose
// sha256 is not known before they are read, such as a file a caller
// names. Until Commit or Discard the temp file is the caller's private
// copy, which the Pending's ReadAt reads: what a caller reads from it are
// the bytes that were hashed, and the bytes Commit stores, whatever
// becomes of r's source meanwhile. Commit keeps a blob of that digest
// already present (its temp is discarded then). r is read to its end,
// but the copy stops once it has taken half of the space that was free
// on its file system when it began (as Write's of a blob without a
// size): a file named as a root wheel has no bound but its size (a
// sparse one is a regular file too), and a root wheel that takes more
// than half of the free space could not be installed anyway (its blob
// and its unpacked files). That, and a full disk, is a *SpaceError,
// unless the bytes are a verified blob the store has already
// (ingestStored): that blob is then the copy, and needs no room. An
// error of r is returned as it is, and cancellation stops the copy. On
// error nothing is left behind.
//
// In a store this user cannot write (an executor reading an operator's),
// the copy is a file of the system's temp directory, unlinked as soon as
// it is created (a memfd where that directory cannot be written either),
// bounded the same way by what is free there (or, for a memfd, by the
// memory available); a full one is a *WriteError naming it, not a
// *SpaceError of the store. It is read the same way, and Commit keeps the blob when the store has it,
// and fails (the store is not writable) when it does not.
func (s *Store) Ingest(ctx context.Context, r io.Reader) (*Pending, error) {
	h := sha256.New()
	read := &countingReader{r: r}
	src := io.TeeReader(read, h)
	room := newRoomReader(src, filepath.Join(s.home, BlobsDir))
	f, n, err := s.writeTemp(ctx, "ingest", "writing a blob", room)
	unnamed := false
	var why *WriteError
	if errors.Is(err, errNotWritable) && errors.As(err, &why) { // nothing was read yet
		unnamed = true
		f, n, err = s.unnamedTemp(ctx, src)
	}
	if !unnamed && errors.Is(err, errNoRoom) {
		err = &SpaceError{Home: s.home, Op: fmt.Sprintf("a copy of %d bytes and no end yet (a blob whose sha256 is not known may take half of the %d bytes that were free when it began, no more)", n, room.free), Err: err}
	}
	if se := (*SpaceError)(nil); !unnamed && errors.As(err, &se) {
		// The copy did not fit (its temp is removed): bytes the store
		// has already need none. Those are read on, hashed only, and
		// when they are a verified blob's, that blob is the copy.
		if p := s.ingestStored(ctx, h, read, src); p != nil {
			return p, nil
		}
		return nil, err
	}
	if err != nil {
		return nil, err // the store's or the temp directory's (classified), ctx's or the reader's
	}
	d := digest.FromBytes(h.Sum(nil))
	return &Pending{d: d, size: n, f: f, path: s.Path(d), ingested: true, unnamed: unnamed, why: why}, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ingestStored reads the rest of Ingest's source src (read counts what
// was read of it, h hashes it), writing nothing, and returns the blob of
// the digest they hash to as a Pending (stored) when the store has it,
// verified, with that many bytes: a root wheel the store has already
// (an env create refused for free space, run again) is not copied
// again, and the run gets as far as its free-space check. It reads no
// more bytes than the largest blob in the store has, so an endless
// source stops there; it returns nil when the bytes are no blob's, or
// reading fails.
func (s *Store) ingestStored(ctx context.Context, h hash.Hash, read *countingReader, src io.Reader) *Pending {
	max := s.largestBlob()
	if read.n > max {
		return nil
	}
	if _, err := copyCtx(ctx, io.Discard, io.LimitReader(src, max-read.n+1)); err != nil || read.n > max {
		return nil
	}
	d := digest.FromBytes(h.Sum(nil))
	f, size, err := s.open(d, false)
	if err != nil {
		return nil
	}
	if size != read.n {
		f.Close()
		return nil
	}
	return &Pending{d: d, size: size, f: f, path: s.Path(d), ingested: true, stored: true}
}

// largestBlob is the size of the largest blob in the store, 0 when it
// has none or they cannot be listed.
func (s *Store) largestBlob() int64 {
	es, err := os.ReadDir(filepath.Join(s.home, BlobsDir))
	if err != nil {
		return 0
	}
	var max int64
	for _, e := range es {
		if !isHexName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Size() > max {
			max = fi.Size()
		}
	}
	return max
}

// unnamedTemp copies src into a file of the system's temp directory that
// is unlinked at once: only the descriptor returned reaches it. Where
// that directory cannot be written (a reader's TMPDIR missing or
// read-only: reading a store never needed one), the copy is a memfd, in
// memory, as the root wheel was before it was copied at all. Either stops
// once it has taken half of what was free when it began (on the temp
// directory's file system, or the memory the kernel counts available for
// a memfd), as Ingest's copy in the store does; that, and a full one, is
// a *WriteError naming it (not a *SpaceError of the store, whose advice,
// free space there and gc it, this user cannot follow).
func (s *Store) unnamedTemp(ctx context.Context, src io.Reader) (_ *os.File, _ int64, err error) {
	dir := os.TempDir()
	op := "a private copy in that directory (the store " + s.home + " cannot be written)"
	hint := "free space there, or set TMPDIR to a directory with room"
	room := newRoomReader(src, dir)
	var sfs unix.Statfs_t
	if unix.Statfs(dir, &sfs) == nil && sfs.Type == unix.TMPFS_MAGIC {
		// A tmpfs is memory (a container's /tmp, often): its pages count
		// against the memory cgroup, whatever room the tmpfs says it has.
		avail := func() int64 {
			d, m := freeBytes(dir), memAvailable()
			if d < 0 || (m >= 0 && m < d) {
				return m
			}
			return d
		}
		room = &roomReader{r: src, avail: avail, free: avail()}
	}
	f, err := os.CreateTemp("", ".cruxprov-ingest-*")
	if err == nil {
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return nil, 0, writeFailure(dir, op, err)
		}
	} else {
		fd, merr := unix.MemfdCreate(".cruxprov-ingest", unix.MFD_CLOEXEC)
		if merr != nil {
			return nil, 0, writeFailure(dir, op, fmt.Errorf("%w (nor a memfd: %v)", err, merr))
		}
		f = os.NewFile(uintptr(fd), "memfd:.cruxprov-ingest")
		op = "a private copy in memory, a memfd, as that directory cannot be written (nor can the store " + s.home + ")"
		hint = "set TMPDIR to a directory this user can write, with room"
		room = &roomReader{r: src, avail: memAvailable, free: memAvailable()}
	}
	n, err := copyCtx(ctx, f, room)
	if err == nil {
		return f, n, nil
	}
	f.Close()
	var we *writeErr
	var errno unix.Errno
	switch {
	case errors.Is(err, errNoRoom):
		err = &WriteError{Dir: dir, Op: fmt.Sprintf("%s: %d bytes and no end yet (a copy may take half of the %d bytes that were free when it began, no more)", op, n, room.free), Err: err, Hint: hint}
	case errors.As(err, &we) && errors.As(err, &errno) && (errno == unix.ENOSPC || errno == unix.EDQUOT):
		err = &WriteError{Dir: dir, Op: fmt.Sprintf("%s: %d bytes and more", op, n), Err: errno, Hint: hint}
	case we != nil:
		err = writeFailure(dir, op, we.err)
	}
	return nil, n, err
}

// errNotWritable is a blob temp this user may not create in the store.
var errNotWritable = errors.New("the store cannot be written")

// notWritable is the *WriteError of op for a store whose blobs this user
// may not create (err, EACCES, EPERM or EROFS), saying what would let it:
// a read-only file system remounted, a directory of this user's own given
// its write permission back, another user's store used as that user.
func (s *Store) notWritable(op string, err error) error {
	dir := filepath.Join(s.home, BlobsDir)
	hint := "fetch as its owner, or into a store of your own"
	var st unix.Stat_t
	switch {
	case errors.Is(err, unix.EROFS):
		hint = "its file system is mounted read-only: remount it read-write, or use a store of your own"
	case unix.Stat(dir, &st) == nil && int(st.Uid) == os.Geteuid() && os.Geteuid() != 0 && st.Mode&0o200 == 0:
		hint = "it is this user's, without write permission: chmod u+w " + dir
	case unix.Stat(dir, &st) == nil && (int(st.Uid) == os.Geteuid() || os.Geteuid() == 0):
		hint = "writing is denied although the directory's mode allows it: an immutable attribute (lsattr -d " + dir + "), NFS's root_squash or a security module (SELinux, AppArmor); lift it, or use a store of your own"
	case unix.Stat(dir, &st) == nil:
		hint = fmt.Sprintf("it is not writable by this user (uid %d; its owner is uid %d): fetch as its owner, or into a store of your own", os.Geteuid(), st.Uid)
	}
	return &WriteError{Dir: s.home, Op: op, Err: fmt.Errorf("%w; %w", err, errNotWritable), Hint: hint}
}

// writeTemp copies src into a new owner-locked temp file in the blobs
// directory named after stem, made read-only once written, and returns
// it open (read-write) with its length. On error the temp is removed; an
// error of the store's is a *SpaceError or a *WriteError of op (one that
// is errNotWritable when this user may not create the temp), and an error
// of src (or ctx's) is returned as it is.
func (s *Store) writeTemp(ctx context.Context, stem, op string, src io.Reader) (_ *os.File, _ int64, err error) {
	f, err := createTemp(filepath.Join(s.home, BlobsDir), stem)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		return nil, 0, s.notWritable(op, err)
	}
	if err != nil {
		return nil, 0, s.failed(op, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
			f.Close()
		}
	}()
	n, err := copyCtx(ctx, f, src)
	if we := (*writeErr)(nil); errors.As(err, &we) {
		return nil, n, s.failed(op, we.err)
	}
	if err != nil {
		return nil, n, err
	}
	if err = f.Chmod(0o444); err != nil {
		return nil, n, s.failed(op, err)
	}
	return f, n, nil
}

// MaxUnsized bounds a blob written without a size (Write, Put): an index
// that sends without end is cut off there.
const MaxUnsized = 8 << 30

// errNoRoom is a blob written without a size that took half of the space
// free when it began.
var errNoRoom = errors.New("half of the free space taken")

// roomCheck is how many bytes roomReader reads between two looks at the
// free space.
const roomCheck = 4 << 20

// roomReader reads r until its place (the file system of a directory, or
// memory) has less than half of the space that was free on it when it was
// made (errNoRoom): a blob
// written without a size, from an index that sends without end, stops
// there rather than fill the disk, whatever other downloads run beside it
// (each stops at the same floor). Where the free space cannot be read, it
// reads r as it is (MaxUnsized still bounds it).
type roomReader struct {
	r     io.Reader
	avail func() int64 // bytes free now; -1 unknown
	free  int64        // bytes free when made; -1 unknown
	since int64        // bytes read since the last look
}

func newRoomReader(r io.Reader, dir string) *roomReader {
	avail := func() int64 { return freeBytes(dir) }
	return &roomReader{r: r, avail: avail, free: avail()}
}

func (r *roomReader) Read(p []byte) (int, error) {
	if r.free >= 0 && r.since >= roomCheck {
		r.since = 0
		// None free when it began (known): nothing may be taken.
		if now := r.avail(); now >= 0 && (now < r.free/2 || r.free == 0) {
			return 0, errNoRoom
		}
	}
	n, err := r.r.Read(p)
	r.since += int64(n)
	return n, err
}

// freeBytes is what an unprivileged writer may still write on dir's file
// system, -1 when it cannot be read.
func freeBytes(dir string) int64 {
	var sfs unix.Statfs_t
	if unix.Statfs(dir, &sfs) != nil || sfs.Bsize <= 0 {
		return -1
	}
	return int64(sfs.Bavail) * int64(sfs.Bsize)
}

// Commit makes pending blobs durable and visible: it fsyncs their temp
// files (concurrently, so the journal commits once for many), renames
// each to its blob name, closes it (dropping its lock) and fsyncs the
// directory. If ctx is done before the renames begin, or an fsync fails,
// every pending blob is discarded; so are they when one is Ingest's copy
// in a store this user cannot write and the store lacks it. Blobs already
// present are skipped.
func (s *Store) Commit(ctx context.Context, ps []*Pending) error {
	var todo []*Pending
	for _, p := range ps {
		if p == nil || p.f == nil {
			continue
		}
		if p.ingested {
			// Ingest did not look: a blob present with the right bytes
			// is kept (a damaged one was removed by Check and is replaced).
			if ok, _, _ := s.Check(p.d); ok {
				p.Discard()
				continue
			}
		}
		if p.stored {
			// The blob Ingest found went since (gc, or found damaged):
			// its bytes, open still, are written again.
			q, err := s.Write(ctx, p.d, p.size, io.NewSectionReader(p.f, 0, p.size))
			p.Discard()
			if err != nil {
				for _, q := range ps {
					if q != nil {
						q.Discard()
					}
				}
				return err
			}
			p = q
			if p.f == nil {
				continue
			}
		}
		if p.unnamed {
			for _, q := range ps {
				if q != nil {
					q.Discard()
				}
			}
			return &WriteError{Dir: s.home, Op: "storing blob " + p.d.Hex()[:12], Err: p.why.Err, Hint: p.why.Hint}
		}
		todo = append(todo, p)
	}
	if len(todo) == 0 {
		return nil
	}
	discard := func() {
		for _, p := range todo {
			p.Discard()
		}
	}
	if err := ctx.Err(); err != nil {
		discard()
		return err
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, p := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := p.f.Sync(); err != nil {
				errs[i] = s.failed("syncing blob "+p.d.Hex()[:12], err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			discard()
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		discard()
		return err
	}
	for i, p := range todo {
		if err := os.Rename(p.f.Name(), p.path); err != nil {
			for _, q := range todo[i:] {
				q.Discard()
			}
			return s.failed("storing blob "+p.d.Hex()[:12], err)
		}
		s.stamp(p.d, p.f) // verified while written: the next reader need not hash it
		p.f.Close()       // releases the temp's flock only once it is renamed
		p.f = nil
	}
	return s.failed("syncing the blobs directory", s.blobs.sync())
}

// groupSync fsyncs a directory for many concurrent callers at once (group
// commit): a caller returns once an fsync that started after its call has
// finished, and callers that arrive during one fsync share the next.
type groupSync struct {
	dir       string
	mu        sync.Mutex
	cond      *sync.Cond
	running   bool
	started   uint64
	completed uint64
	err       error // of the last completed fsync
}

func (g *groupSync) sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	target := g.started + 1 // the first fsync to start from now on
	for g.completed < target {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := syncDir(g.dir)
		g.mu.Lock()
		g.running, g.completed, g.err = false, n, err
		g.cond.Broadcast()
	}
	return g.err
}

// SpaceError is a write to the store that failed because its file
// system is full (ENOSPC) or the writer's quota is used up (EDQUOT): a
// failure of the host, not a refusal. Nothing partial was kept; freeing
// space (unused blobs, other files on that file system) and running
// again completes the work.
type SpaceError struct {
	// Home is the store's root; Op what was being written.
	Home string
	Op   string
	Err  error
	// Inodes is set when the file system ran out of inodes, not blocks
	// (statfs: no free inode, blocks free): ENOSPC says the same for
	// both, and freeing megabytes does not help a volume of many small
	// files; removing files does.
	Inodes bool
}

func (e *SpaceError) Error() string {
	if e.Inodes {
		return fmt.Sprintf("no inode left for the store %s (its file system has blocks free but no free inode; df -i shows them): %s: %v; remove files on its file system (blobs nothing uses can be collected) and run again", e.Home, e.Op, e.Err)
	}
	return fmt.Sprintf("no space left for the store %s: %s: %v; free space on its file system (blobs nothing uses can be collected) and run again", e.Home, e.Op, e.Err)
}

// outOfInodes reports whether the file system of dir has blocks free but
// no inode (a file system that counts none, as btrfs, never has).
func outOfInodes(dir string) bool {
	var sfs unix.Statfs_t
	return unix.Statfs(dir, &sfs) == nil && sfs.Files > 0 && sfs.Ffree == 0 && sfs.Bavail > 0
}

// Unwrap returns the system error.
func (e *SpaceError) Unwrap() error { return e.Err }

// WriteError is a write to the store, or to the private copy Ingest makes
// outside it, that failed for a reason other than a full disk (a
// *SpaceError): the store is not this user's to write, its file system is
// read-only, or it failed (EIO). Like a full disk it is a failure of the
// host, not of the bytes' source and not a refusal: a caller that
// downloads does not blame the index for it or retry. Nothing partial was
// kept.
type WriteError struct {
	// Dir is where the write failed: the store's root, or the temp
	// directory of Ingest's copy outside a store this user cannot write.
	Dir string
	// Op is what was being written.
	Op  string
	Err error
	// Hint says what to do; empty, the generic advice.
	Hint string
}

func (e *WriteError) Error() string {
	hint := e.Hint
	if hint == "" {
		hint = "fix that (a failing disk shows in the kernel log; `ulimit -f` is the file size limit) and run again"
	}
	return fmt.Sprintf("cannot write %s: %s: %v; %s", e.Dir, e.Op, e.Err, hint)
}

// Unwrap returns the cause.
func (e *WriteError) Unwrap() error { return e.Err }

// IsWriteFailure reports whether err is the store's failure to write (a
// *SpaceError or a *WriteError): the host's, not the source's.
func IsWriteFailure(err error) bool {
	var se *SpaceError
	var we *WriteError
	return errors.As(err, &se) || errors.As(err, &we)
}

// writeErr marks an error of the writer in copyCtx, which a caller tells
// from an error of the reader (that passes as it is).
type writeErr struct{ err error }

func (e *writeErr) Error() string { return "write: " + e.err.Error() }
func (e *writeErr) Unwrap() error { return e.err }

// failed wraps an error of the store's own while writing op: a
// *SpaceError when the disk or quota is full, else a *WriteError. One
// named already, a refusal, or ctx's error passes as it is.
func (s *Store) failed(op string, err error) error {
	return writeFailure(s.home, op, err)
}

// NoSpace is err as the *SpaceError of the store at home, when it is a
// write op's there that failed for a full file system or quota (ENOSPC,
// EDQUOT); nil otherwise. It is for a caller that writes its own files
// in the store (image build's layers, in its staging), whose other
// errors may be its inputs' rather than the store's.
func NoSpace(home, op string, err error) *SpaceError {
	var se *SpaceError
	if errors.As(err, &se) {
		return se
	}
	var errno unix.Errno
	if errors.As(err, &errno) && (errno == unix.ENOSPC || errno == unix.EDQUOT) {
		return &SpaceError{Home: home, Op: op, Err: errno, Inodes: errno == unix.ENOSPC && outOfInodes(home)}
	}
	return nil
}

func writeFailure(dir, op string, err error) error {
	var se *SpaceError
	var we *WriteError
	if err == nil || errors.As(err, &se) || errors.As(err, &we) || refusal.CodeOf(err) != "" ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var errno unix.Errno
	if errors.As(err, &errno) && (errno == unix.ENOSPC || errno == unix.EDQUOT) {
		return &SpaceError{Home: dir, Op: op, Err: errno, Inodes: errno == unix.ENOSPC && outOfInodes(dir)}
	}
	return &WriteError{Dir: dir, Op: op, Err: err}
}

// relock is what a mismatch between the bytes an index served and the
// lock's hash or size says to do when the lock is what is wrong.
const relock = "edited by hand, or the wheel rebuilt after locking: lock it again"

// copyCtx copies until EOF, an error, or ctx is done.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, &writeErr{werr}
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// createTemp creates and flocks a temp file in dir. The flock marks it as
// owned: cleanup removes only temps whose lock it can take. If a cleaner
// removed the name between create and lock, the file has no link left and
// another name is tried.
func createTemp(dir, stem string) (*os.File, error) {
	for i := 0; i < 100; i++ {
		f, err := os.CreateTemp(dir, tempPrefix+stem+"-*")
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return nil, err
		}
		if st.Nlink > 0 {
			return f, nil
		}
		f.Close()
	}
	return nil, errors.New("cannot create a temp file: it keeps being removed")
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("store: fsync %s: %w", dir, err)
	}
	return nil
}

// Staging is a directory under tmp/ owned by this process until Release;
// work is built there and renamed into place.
type Staging struct {
	// Path is the staging directory.
	Path string
	lock *os.File
}

// Release removes what is left of the staging directory and drops its
// ownership. Call it after renaming the result out, or on failure.
func (st *Staging) Release() error {
	err := os.RemoveAll(st.Path)
	os.Remove(st.Path + ".lock")
	st.lock.Close()
	return err
}

// Stage creates a staging directory under tmp/ named after prefix. While
// it is held (until Release or the process's end), CleanStaging leaves it
// alone; after a crash, the next CleanStaging removes it.
//
// The lock file is created and flocked before the directory exists, so a
// directory whose lock file is missing can only be a dead owner's: made
// the other way round, a cleaner could find the new directory before its
// lock and remove it under its owner.
func (s *Store) Stage(prefix string) (*Staging, error) {
	dir := filepath.Join(s.home, TmpDir)
	for i := 0; i < 100; i++ {
		lf, err := os.CreateTemp(dir, strings.ReplaceAll(prefix, "/", "_")+"-*.lock")
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
			lf.Close()
			os.Remove(lf.Name())
			return nil, fmt.Errorf("store: %w", err)
		}
		// A cleaner may have taken the lock before we did and removed the
		// file (a lock without its directory is debris): start again.
		var st unix.Stat_t
		if unix.Fstat(int(lf.Fd()), &st) != nil || st.Nlink == 0 {
			lf.Close()
			continue
		}
		p := strings.TrimSuffix(lf.Name(), ".lock")
		if err := os.Mkdir(p, 0o700); err != nil {
			os.Remove(lf.Name())
			lf.Close()
			if errors.Is(err, fs.ErrExist) {
				continue // debris of that name: another name
			}
			return nil, fmt.Errorf("store: %w", err)
		}
		return &Staging{Path: p, lock: lf}, nil
	}
	return nil, errors.New("store: cannot create a staging directory")
}

// CleanStaging removes debris that crashed or killed processes left: blob
// temp files and staging directories whose owner no longer holds their
// lock. It is safe beside other processes using the store. It returns the
// removed paths, relative to the store's root.
func (s *Store) CleanStaging(ctx context.Context) ([]string, error) {
	removed, _, err := s.clean(ctx, false)
	return removed, err
}

// clean is CleanStaging, also as a dry run; it returns the bytes of the
// files it removed (or would) too.
func (s *Store) clean(ctx context.Context, dryRun bool) (removed []string, bytes int64, err error) {
	// Blob temps, and stamp temps (a process killed while it recorded a
	// stamp leaves one): each flocked by its writer while it lives.
	for _, sub := range []string{BlobsDir, StampsDir} {
		ents, err := os.ReadDir(filepath.Join(s.home, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue // stamps: made by the first stamp; blobs: a store OpenExisting found without them
		}
		if err != nil {
			return removed, bytes, fmt.Errorf("store: %w", err)
		}
		for _, e := range ents {
			if ctx.Err() != nil {
				return removed, bytes, ctx.Err()
			}
			if !strings.HasPrefix(e.Name(), tempPrefix) {
				continue
			}
			p := filepath.Join(s.home, sub, e.Name())
			if ok, n := removeIfUnlocked(p, p, dryRun); ok {
				bytes += n
				removed = append(removed, filepath.ToSlash(filepath.Join(sub, e.Name())))
			}
		}
	}
	tmp := filepath.Join(s.home, TmpDir)
	ents, err := os.ReadDir(tmp)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none: no staging left to clean
		return removed, bytes, fmt.Errorf("store: %w", err)
	}
	listed := map[string]bool{}
	for _, e := range ents {
		listed[e.Name()] = true
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return removed, bytes, ctx.Err()
		}
		name := e.Name()
		p := filepath.Join(tmp, name)
		if strings.HasSuffix(name, ".lock") {
			if listed[strings.TrimSuffix(name, ".lock")] {
				continue // goes with its directory
			}
			if _, err := os.Lstat(strings.TrimSuffix(p, ".lock")); errors.Is(err, fs.ErrNotExist) {
				if ok, n := removeIfUnlocked(p, p, dryRun); ok {
					bytes += n
					removed = append(removed, filepath.ToSlash(filepath.Join(TmpDir, name)))
				}
			}
			continue
		}
		if ok, n := removeIfUnlocked(p+".lock", p, dryRun); ok {
			bytes += n
			removed = append(removed, filepath.ToSlash(filepath.Join(TmpDir, name)))
		}
	}
	return removed, bytes, nil
}

// removeIfUnlocked removes target (and lockPath) when lockPath's flock can
// be taken, holding it while removing; a missing lock file means nobody
// owns target.
func removeIfUnlocked(lockPath, target string, dryRun bool) (bool, int64) {
	f, err := os.OpenFile(lockPath, os.O_RDONLY|unix.O_NONBLOCK, 0) // a FIFO there must not hang the cleaner
	if errors.Is(err, fs.ErrNotExist) {
		n := TreeBytes(target)
		if dryRun {
			return true, n
		}
		return makeWritableAndRemove(target) == nil, n
	}
	if err != nil {
		return false, 0
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false, 0
	}
	n := TreeBytes(target)
	if dryRun {
		return true, n
	}
	if err := makeWritableAndRemove(target); err != nil {
		return false, 0
	}
	if lockPath != target {
		os.Remove(lockPath)
	}
	return true, n
}

// TreeBytes is the size of the regular files at or under p (what removing
// it frees, as gc reports it); what cannot be read counts nothing.
func TreeBytes(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// makeWritableAndRemove removes p, giving owner write permission to
// read-only directories inside it first (a half-built env may be sealed
// read-only already).
func makeWritableAndRemove(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if fi, e := d.Info(); e == nil {
				os.Chmod(q, fi.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	return os.RemoveAll(p)
}

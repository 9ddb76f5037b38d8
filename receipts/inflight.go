package receipts

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/refusal"
)

// The key locks (DESIGN §10: an attempt still running under a key must
// not run twice). While an attempt with an idempotency key is running,
// the Ledger that began it holds a write lock on one byte of the sidecar
// <path>.inflight, at an offset taken from the sha256 of the key. The
// kernel drops the lock when the Ledger is closed or its process dies,
// SIGKILL included, so Begin, holding the ledger's flock, tells a running
// attempt of another process (an intent without outcome whose key lock is
// held: idempotency_conflict) from an orphan (one whose key lock nobody
// holds: a new attempt). On Linux the locks are open file description
// locks (F_OFD_SETLK): two Ledgers on one path, even in one process,
// exclude each other. The file stays empty; it holds no data and is never
// synced.

// keyOffset is the byte of the sidecar that stands for key: the first 6
// bytes of its sha256, so that two keys meet with odds of 2^-48.
func keyOffset(key string) int64 {
	h := sha256.Sum256([]byte(key))
	var b [8]byte
	copy(b[2:], h[:6])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// inflightFile opens the sidecar on first use, creating it 0600. The
// caller holds l.mu.
func (l *Ledger) inflightFile() (*os.File, error) {
	if l.keys != nil {
		return l.keys, nil
	}
	f, err := openKeyLocks(l.side, l.path, os.O_CREATE)
	if err != nil {
		return nil, err
	}
	l.keys = f
	return f, nil
}

// notKeyLocksAdvice is what to do about an in-flight lock file that is
// not the regular file a keyed run makes (0600): no run holds a key lock
// in it, so removing it loses nothing.
const notKeyLocksAdvice = "it is not the regular file a keyed run makes there: remove it, and the next keyed run makes it"

// openKeyLocks opens the key-lock sidecar of the ledger path (whose
// file is side) for writing, as a keyed Begin takes its locks in it
// (flag: os.O_CREATE to make it, 0600, when missing), refusing
// ledger_write_failed one it cannot open or that is not a regular file.
// Writable asks the same question without making it.
func openKeyLocks(side, path string, flag int) (*os.File, error) {
	p := side + ".inflight"
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|flag, 0o600)
	if err != nil {
		// A directory (EISDIR) or a symbolic link (ELOOP, O_NOFOLLOW)
		// there is said as what it is.
		if st, lerr := os.Lstat(p); lerr == nil && !st.Mode().IsRegular() {
			return nil, refusal.Wrap(refusal.LedgerWriteFailed, err, "the in-flight lock file %s of receipts ledger %s is %s; %s", p, path, filekind.NotRegular(st.Mode()), notKeyLocksAdvice)
		}
		if errors.Is(err, unix.EACCES) {
			if _, lerr := os.Lstat(p); errors.Is(lerr, fs.ErrNotExist) {
				// Not there, and its directory refused to make it: the
				// file's mode, which the advice below was about, is not
				// what stops the run (a ledger in a directory of mode
				// 0555 was told to chmod a file that did not exist).
				return nil, keyLocksUncreatable(p, path, err)
			}
			return nil, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot open the in-flight lock file %s of receipts ledger %s: %v; make it writable by this user (chmod u+w, or chown it to this user)", p, path, err)
		}
		return nil, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot open the in-flight lock file %s of receipts ledger %s", p, path)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot stat the in-flight lock file %s of receipts ledger %s", p, path)
		}
		return nil, refusal.New(refusal.LedgerWriteFailed, "the in-flight lock file %s of receipts ledger %s is %s; %s", p, path, filekind.NotRegular(st.Mode()), notKeyLocksAdvice)
	}
	return f, nil
}

// keyLocksCreatable is Writable's answer for key locks not made yet: the
// first Begin with an idempotency key creates <side>.inflight beside the
// ledger (openKeyLocks with O_CREAT), so its directory must take new
// entries. A ledger this user may write in a directory it may not (0555)
// took every run without a key, and receipts scan exited 0, while every
// keyed run was refused "cannot create the in-flight lock file"; one whose
// key locks existed unwritable was refused by the scan already. The
// refusal is the writer's, word for word.
func keyLocksCreatable(side, path string) error {
	p := side + ".inflight"
	err := unix.Access(filepath.Dir(p), unix.W_OK|unix.X_OK)
	if err == nil {
		return nil
	}
	perr := &fs.PathError{Op: "open", Path: p, Err: err}
	if errors.Is(err, unix.EACCES) {
		return keyLocksUncreatable(p, path, perr)
	}
	return refusal.Wrap(refusal.LedgerWriteFailed, perr, "cannot open the in-flight lock file %s of receipts ledger %s", p, path)
}

// keyLocksUncreatable refuses the key locks p of the ledger at path,
// not there, whose directory this user may not add to (err, EACCES):
// the keyed Begin's refusal, and Writable's before one.
func keyLocksUncreatable(p, path string, err error) error {
	return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot create the in-flight lock file %s of receipts ledger %s: %v; make the directory %s writable by this user (the first run with an idempotency key makes that file there)", p, path, err, filepath.Dir(p))
}

// lockKey takes the key lock of key without waiting. It reports false
// when another Ledger (another process, or another Ledger of this one)
// holds it. The caller holds l.mu.
func (l *Ledger) lockKey(key string) (bool, error) {
	f, err := l.inflightFile()
	if err != nil {
		return false, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: keyOffset(key), Len: 1}
	for {
		err = unix.FcntlFlock(f.Fd(), setLockCmd, &lk)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES):
		return false, nil
	}
	return false, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot lock idempotency key %q in %s", key, f.Name())
}

// unlockKey releases the key lock of key, unless another attempt this
// Ledger runs needs the same byte. The caller holds l.mu and has already
// removed the attempt from l.inflight.
func (l *Ledger) unlockKey(key string) {
	if key == "" || l.keys == nil {
		return
	}
	off := keyOffset(key)
	for _, k := range l.inflight {
		if k != "" && keyOffset(k) == off {
			return
		}
	}
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: off, Len: 1}
	for unix.FcntlFlock(l.keys.Fd(), setLockCmd, &lk) == unix.EINTR {
	}
}

// KeyHeld reports whether a writer holds the key lock of key in the
// ledger at path: whether an attempt under key that has no outcome is
// still running (true) or an orphan (false), as Begin tells them apart. It
// only reads (a missing sidecar: nobody holds it). Attempts without a key
// take no lock: for them it cannot tell, and reports false.
func KeyHeld(path, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	side, err := filepath.EvalSymlinks(path)
	if err != nil {
		side = path
	}
	f, err := os.OpenFile(side+".inflight", os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: keyOffset(key), Len: 1}
	for {
		err = unix.FcntlFlock(f.Fd(), getLockCmd, &lk)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

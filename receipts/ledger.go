package receipts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/kernelfs"
	"github.com/cruxible/cruxprov/refusal"
)

// DefaultLockTTL was the age past which a repair lock was stale.
//
// Deprecated: a repair lock is judged by whether a live writer holds it,
// not by its age (see Options.LockTTL).
const DefaultLockTTL = 30 * time.Second

// Options tune a Ledger.
type Options struct {
	// LockTTL is ignored. The repair lock <path>.lock used to be broken
	// once its mtime was older than this, so that every run after a dead
	// writer's lock waited for it, and one with an mtime in the future
	// waited until then. Its holder now flocks it: one no one holds was
	// left by a dead writer and is taken over at once, one held is waited
	// for (repair.go).
	//
	// Deprecated: kept so that callers that set it still compile.
	LockTTL time.Duration
	// Now is the clock for the times the ledger fills in itself (a zero
	// StartedAt or EndedAt, a replay's EndedAt, a torn row's repaired_at).
	// Nil means time.Now.
	Now func() time.Time
	// NoCheckpoint makes Open read the whole ledger and neither read nor
	// write its checkpoint <path>.checkpoint (checkpoint.go), as before
	// checkpoints were written.
	NoCheckpoint bool
	// CreateAtBegin leaves a ledger that does not exist uncreated (and its
	// missing directories) until the first Begin, which creates it as
	// Open would have: a caller that may refuse before it has anything to
	// record (cruxprov run, whose pin is verified after the Open) leaves
	// nothing behind. Open still refuses, ledger_write_failed, a path
	// whose nearest existing directory is not a directory this process
	// can write. A ledger that exists is opened, read and repaired by
	// Open as always.
	CreateAtBegin bool
}

// Decision is what Begin decided.
type Decision struct {
	// AttemptID is the attempt Begin recorded (the intent's, or a new
	// random one when the intent had none).
	AttemptID string
	// Attempt counts the attempts under the idempotency key, this one
	// included (1 without a key).
	Attempt int
	// Replay, when set, is the recorded ok outcome of an earlier attempt
	// with the same key and input, already written to the ledger as this
	// attempt's replayed outcome: the caller returns it and spawns
	// nothing, and does not call Finish.
	Replay *Outcome
}

// Ledger appends receipts to one ledger file. Its methods are safe for
// concurrent use. One Ledger (one process) per path is the contract; two
// that meet nonetheless serialize their appends with flock, so that rows
// never interleave and a torn tail is repaired once.
type Ledger struct {
	mu       sync.Mutex
	path     string // as given (messages)
	side     string // the file's own path, symbolic links resolved: its sidecars' stem
	f        *os.File
	fd       int
	opts     Options
	end      int64 // the ledger is folded into j up to here
	line     int   // lines folded
	j        *joiner
	sum      hash.Hash         // sha256 of the ledger's bytes [0, end); nil with NoCheckpoint
	ckptAt   int64             // the offset of the last checkpoint loaded or written
	inflight map[string]string // attempts begun here and not finished -> their key
	keys     *os.File          // <path>.inflight, the key locks (inflight.go); nil until a key is used
	broken   error             // set after a failed fsync or Close: the Ledger writes no more
	// uncreated: Open found no ledger and, with CreateAtBegin, left it so;
	// the first Begin creates it (f is nil until then).
	uncreated bool
}

// Open opens the ledger at path for appending, creating it (mode 0600,
// missing directories 0700) when it does not exist (with
// Options.CreateAtBegin, at the first Begin). It reads the whole ledger
// strictly (a corrupt line is refused ledger_corrupt before anything is
// written), finishes an interrupted repair, and repairs a torn tail under
// the repair lock.
func Open(ctx context.Context, path string, opts Options) (*Ledger, error) {
	if path == "" {
		return nil, refusal.New(refusal.LedgerWriteFailed, "no receipts ledger path given (DefaultPath gives none for a state home that is not an absolute path: pass $XDG_STATE_HOME when it is absolute, else ~/.local/state)")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Ledger{path: path, opts: opts, j: newLeanJoiner(), inflight: map[string]string{}}
	if !opts.NoCheckpoint {
		l.sum = sha256.New()
	}
	if err := onKernelFS(path); err != nil {
		return nil, err
	}
	if opts.CreateAtBegin {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if err := creatable(filepath.Dir(path)); err != nil {
				return nil, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot create receipts ledger %s", path)
			}
			l.uncreated = true
			return l, nil
		}
	}
	if err := l.open(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// creatable checks that the nearest existing directory of dir (dir
// itself, or its nearest existing parent) is a directory this process
// may create entries in.
func creatable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && filepath.Dir(d) != d {
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", d)
		}
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return &fs.PathError{Op: "access", Path: d, Err: err}
		}
		return nil
	}
}

// onKernelFS is the ledger_write_failed refusal of a ledger at path on
// a file system of the kernel's (/sys, /proc: kernelfs), there or not,
// which no user (root neither) can keep a ledger on; nil elsewhere.
// Root's access(2) grants W_OK on /sys and /proc, where its mkdir is
// refused all the same: Open with CreateAtBegin and Writable took such
// a ledger (receipts scan said all was well), and its run was refused
// at the intent, after the verify, with "make the nearest directory
// there writable by this user" (another user's, at once, "make the
// directory /sys writable"; of /proc/self, to lift an immutable
// attribute). A ledger file there is no ledger either (a file of
// /proc/sys, say, whose writes set the kernel's parameters).
func onKernelFS(path string) error {
	k, at := kernelfs.Of(path)
	if k == "" {
		return nil
	}
	err := &kernelfs.Error{Path: at, FS: k}
	verb := "create"
	if _, serr := os.Lstat(path); serr == nil {
		verb = "open"
	}
	return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot %s receipts ledger %s: %v; %s", verb, path, err, kernelFSAdvice)
}

// open opens the file at l.path, creating it (and its missing
// directories) when it does not exist, reads it, and repairs its tail.
func (l *Ledger) open(ctx context.Context) error {
	path, opts := l.path, l.opts
	if err := mkdirs(filepath.Dir(path)); err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot create the directory of receipts ledger %s: %v; %s", path, err, mkdirsAdvice(err))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = syncDir(filepath.Dir(path))
	} else if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			// A directory (the state directory named for the ledger in
			// it), or a unix socket (open says ENXIO, "no such device or
			// address"): a *NotRegularError, as Scan's, so that a caller
			// can tell the path named from a ledger it could not open.
			nr := &NotRegularError{Path: path, Mode: st.Mode()}
			return refusal.Wrap(refusal.LedgerWriteFailed, nr, "%v; %s", nr, notRegularAdvice)
		}
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot open receipts ledger %s: %v%s", path, err, openAdvice(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot open receipts ledger %s", path)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		nr := &NotRegularError{Path: path, Mode: st.Mode()}
		return refusal.Wrap(refusal.LedgerWriteFailed, nr, "%v; %s", nr, notRegularAdvice)
	}
	// The sidecars (key locks, repair lock and journal) go beside the file
	// itself, so that every path to it finds the same ones.
	side, err := filepath.EvalSymlinks(path)
	if err == nil {
		var at os.FileInfo
		if at, err = os.Stat(side); err == nil && !os.SameFile(at, st) {
			err = errors.New("it was replaced while it was opened")
		}
	}
	if err != nil {
		f.Close()
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot resolve receipts ledger %s", path)
	}
	l.side, l.f, l.fd = side, f, int(f.Fd())
	err = l.locked(ctx, func() error {
		if !opts.NoCheckpoint {
			if size, err := l.size(); err == nil {
				l.loadCheckpoint(ctx, size)
			}
		}
		if err := l.sync(ctx); err != nil {
			return err
		}
		l.writeCheckpoint()
		return nil
	})
	if err != nil {
		f.Close()
		l.f = nil
		return err
	}
	return nil
}

// create opens the ledger Open left uncreated (Options.CreateAtBegin),
// creating it, at the first Begin. Should that fail, the Ledger is as it
// was (what the failed open read is dropped), and the next Begin tries
// again.
func (l *Ledger) create(ctx context.Context) error {
	if err := l.open(ctx); err != nil {
		l.j, l.end, l.line, l.ckptAt = newLeanJoiner(), 0, 0, 0
		if l.sum != nil {
			l.sum = sha256.New()
		}
		return err
	}
	l.uncreated = false
	return nil
}

// Writable checks that the ledger at path can be opened for appending as
// Open opens it, changing nothing: the refusal Open would give
// (ledger_write_failed) for one this process cannot write (its mode, a
// read-only mount, an immutable attribute), nil for one it can. One that
// does not exist yet is judged as Open with CreateAtBegin judges it (a
// run's first Begin creates it): its nearest existing directory must
// take new entries. receipts scan asks it of the executor's own ledger, so
// that a health check is not told all is well while every run is refused.
//
// Its key locks <path>.inflight, when there are (a run with an
// idempotency key made them), are opened for writing too, as a keyed
// Begin opens them: one this process cannot (left by root, say, running
// with this user's state directory) refuses every keyed run. When there
// are none yet, the first keyed Begin creates them beside the ledger, so
// that directory must take new entries (keyLocksCreatable). And when
// its next writer must repair it first (a torn tail, a last row without
// its newline, a repair journal), the repair lock that writer creates
// beside it must be creatable there (repairLockable).
func Writable(path string) error {
	if err := onKernelFS(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// Not made yet (no run yet): judged as Open with CreateAtBegin
		// judges it, by its nearest existing directory.
		if err := creatable(filepath.Dir(path)); err != nil {
			return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot create receipts ledger %s", path)
		}
		return nil
	}
	if err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot open receipts ledger %s", path)
	}
	defer f.Close()
	side, err := filepath.EvalSymlinks(path)
	if err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot resolve receipts ledger %s", path)
	}
	if err := repairLockable(f, side); err != nil {
		return err
	}
	k, err := openKeyLocks(side, path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return keyLocksCreatable(side, path)
	}
	if err != nil {
		return err
	}
	return k.Close()
}

// repairLockable is Writable's answer for the repair lock: when the next
// writer of the ledger f (its links resolved: side) must repair it first
// (a repair journal beside it, or a last line without its newline, torn
// or whole), it creates the lock <side>.lock beside it (withRepairLock),
// so that directory must take new entries. A ledger file this user may
// write in a directory it may not (0555) took every run without a repair
// due, and receipts scan said so with a torn tail too, "the next writer
// quarantines it", while every run was refused "cannot take the repair
// lock". The refusal is the writer's, word for word.
func repairLockable(f *os.File, side string) error {
	due := false
	if _, err := os.Lstat(side + ".repair"); !errors.Is(err, fs.ErrNotExist) {
		due = true
	} else if st, err := f.Stat(); err == nil && st.Size() > 0 {
		var b [1]byte
		if _, err := f.ReadAt(b[:], st.Size()-1); err == nil && b[0] != '\n' {
			due = true
		}
	}
	if !due {
		return nil
	}
	lp := side + ".lock"
	if err := unix.Access(filepath.Dir(side), unix.W_OK|unix.X_OK); err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, &fs.PathError{Op: "open", Path: lp, Err: err}, "cannot take the repair lock %s", lp)
	}
	return nil
}

// Path returns the ledger's path ("" for a nil Ledger).
func (l *Ledger) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// unopened refuses a Ledger that Open did not make (nil, or a zero
// Ledger{}): it has no file to write, and its zero descriptor is stdin.
func (l *Ledger) unopened() error {
	if l == nil || l.j == nil {
		return refusal.New(refusal.LedgerWriteFailed, "the receipts ledger was not opened (a nil or zero receipts.Ledger): open it with receipts.Open")
	}
	return nil
}

// Begin records the intent of an attempt, durably, before the caller
// spawns anything. With an idempotency key (DESIGN §10):
//   - a key whose first intent has another input digest, provider or
//     entrypoint is refused idempotency_conflict, and so is a key with an
//     attempt still running: one this Ledger began and has not finished,
//     or one whose key lock another Ledger holds (another process's, see
//     inflight.go); nothing is written;
//   - a key with a recorded ok outcome is a replay: Begin writes this
//     attempt's intent and a replayed copy of that outcome (Replayed,
//     ReplayOf naming the original attempt, EndedAt now) in one write,
//     syncs, and returns the copy in Decision.Replay;
//   - otherwise (no attempt yet, or only errors, timeouts, output limits,
//     refusals and orphans) it is a new attempt under the same key, and
//     this Ledger holds the key's lock until Finish (or Close). An orphan
//     is an intent without outcome whose key lock nobody holds: its
//     writer died.
//
// A zero StartedAt is set to now, an empty AttemptID to a random one. An
// intent that would not be a valid row (a missing digest, say) and any
// failed write or sync is refused ledger_write_failed, as is a Ledger
// Open did not make (nil, or a zero Ledger{}): nothing is written.
func (l *Ledger) Begin(ctx context.Context, in Intent) (Decision, error) {
	if err := l.unopened(); err != nil {
		return Decision{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return Decision{}, l.broken
	}
	if l.uncreated {
		if err := l.create(ctx); err != nil {
			return Decision{}, err
		}
	}
	if in.AttemptID == "" {
		in.AttemptID = newAttemptID()
	}
	if in.StartedAt.IsZero() {
		in.StartedAt = l.opts.Now()
	}
	b, err := encodeIntent(in)
	if err != nil {
		return Decision{}, refusal.Wrap(refusal.LedgerWriteFailed, err, "the intent of attempt %s is not a valid receipt", in.AttemptID)
	}
	var dec Decision
	err = l.locked(ctx, func() error {
		if err := l.sync(ctx); err != nil {
			return err
		}
		if l.j.known(in.AttemptID) {
			return refusal.New(refusal.LedgerWriteFailed, "attempt %s is already in receipts ledger %s", in.AttemptID, l.path)
		}
		dec = Decision{AttemptID: in.AttemptID, Attempt: 1}
		k := in.IdempotencyKey
		if k != "" {
			ks := l.j.keys[k]
			if ks != nil {
				first := ks.first.Intent
				if first.InputDigest != in.InputDigest || first.Provider != in.Provider || first.Entrypoint != in.Entrypoint {
					// What sending the first request again gets: its
					// recorded outcome only when an attempt under the
					// key ended ok; otherwise a new attempt.
					gets := "to get its recorded outcome"
					if ks.ok == nil {
						gets = "to run it again (no attempt under the key has ended ok)"
					}
					return refusal.New(refusal.IdempotencyConflict,
						"idempotency key %q was first used by attempt %s for %s %s with input %s, not for %s %s with input %s; "+
							"give a new request a new key, or send attempt %s's input again under this one %s",
						k, first.AttemptID, first.Provider, first.Entrypoint, first.InputDigest, in.Provider, in.Entrypoint, in.InputDigest, first.AttemptID, gets)
				}
				for id, key := range l.inflight {
					if key == k {
						return refusal.New(refusal.IdempotencyConflict, "idempotency key %q: attempt %s is still running; send the request again once it has ended", k, id)
					}
				}
				dec.Attempt = ks.attempts + 1
				if ks.ok != nil {
					ok, err := l.okAttempt(ks)
					if err != nil {
						return err
					}
					rep := replayOf(*ok, in.AttemptID, l.opts.Now())
					ob, err := encodeOutcome(rep)
					if err != nil {
						return refusal.Wrap(refusal.LedgerWriteFailed, err, "the replayed outcome of attempt %s is not a valid receipt", in.AttemptID)
					}
					if err := l.append(ctx, append(b, ob...)); err != nil {
						return err
					}
					dec.Replay = &rep
					return nil
				}
			}
			// Taken under the flock: no other writer can begin or
			// finish an attempt under k until the intent is written.
			got, err := l.lockKey(k)
			if err != nil {
				return err
			}
			if !got {
				running := "an attempt of another writer"
				if ks != nil && ks.last.Outcome == nil {
					running = "attempt " + ks.last.Intent.AttemptID
				}
				return refusal.New(refusal.IdempotencyConflict, "idempotency key %q: %s is still running (its writer holds the key's lock in %s.inflight); send the request again once it has ended", k, running, l.side)
			}
		}
		if err := l.append(ctx, b); err != nil {
			l.unlockKey(k)
			return err
		}
		l.inflight[in.AttemptID] = k
		return nil
	})
	if err != nil {
		return Decision{}, err
	}
	return dec, nil
}

// replayOf copies the ok outcome of a as the outcome of attempt id.
func replayOf(a Attempt, id string, now time.Time) Outcome {
	rep := *a.Outcome
	rep.AttemptID = id
	rep.EgressDeclared = slices.Clone(rep.EgressDeclared)
	rep.EgressObserved = slices.Clone(rep.EgressObserved)
	if !rep.Replayed {
		rep.ReplayOf = a.Intent.AttemptID
	}
	rep.Replayed = true
	rep.EndedAt = now
	return rep
}

// Finish records the outcome of an attempt, durably. The attempt must
// have an intent in the ledger and no outcome yet; otherwise, or when the
// outcome is not a valid row or the write or sync fails, it is refused
// ledger_write_failed. A zero EndedAt is set to now. Whatever it returns,
// the attempt no longer counts as running in this Ledger: one whose
// outcome could not be written is an orphan, and its key runs again. The
// key lock is released under the flock, after the outcome is written, so
// that another writer never sees the attempt finished and its key locked.
func (l *Ledger) Finish(ctx context.Context, out Outcome) error {
	if err := l.unopened(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := l.inflight[out.AttemptID]
	delete(l.inflight, out.AttemptID)
	released := false
	release := func() {
		if !released {
			released = true
			l.unlockKey(key)
		}
	}
	defer release()
	if l.broken != nil {
		return l.broken
	}
	if out.EndedAt.IsZero() {
		out.EndedAt = l.opts.Now()
	}
	b, err := encodeOutcome(out)
	if err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "the outcome of attempt %s is not a valid receipt", out.AttemptID)
	}
	if l.uncreated {
		return refusal.New(refusal.LedgerWriteFailed, "attempt %s has no intent in receipts ledger %s", out.AttemptID, l.path)
	}
	return l.locked(ctx, func() error {
		defer release()
		if err := l.sync(ctx); err != nil {
			return err
		}
		a := l.j.attempts[out.AttemptID]
		if a == nil && !l.j.known(out.AttemptID) {
			return refusal.New(refusal.LedgerWriteFailed, "attempt %s has no intent in receipts ledger %s", out.AttemptID, l.path)
		}
		if a == nil || a.Outcome != nil {
			return refusal.New(refusal.LedgerWriteFailed, "attempt %s already has an outcome in receipts ledger %s", out.AttemptID, l.path)
		}
		return l.append(ctx, b)
	})
}

// Close closes the ledger file and releases the key locks: an attempt
// begun and not finished is an orphan from then on. Every row already
// returned was synced. Close of a nil Ledger, or of one Open did not
// make, is a no-op that returns nil, as io.Closer users expect.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if l.broken == nil {
			l.broken = refusal.New(refusal.LedgerWriteFailed, "receipts ledger %s is closed", l.path)
		}
		return nil
	}
	if l.keys != nil {
		l.keys.Close()
		l.keys = nil
	}
	err := l.f.Close()
	l.f = nil
	l.broken = refusal.New(refusal.LedgerWriteFailed, "receipts ledger %s is closed", l.path)
	return err
}

// DefaultPath is where an executor's ledger lives (DESIGN §10):
// <stateHome>/cruxprov/receipts/<hostname>-<uid>.jsonl. The caller
// resolves stateHome as the XDG base directory spec and cmd/ do:
// $XDG_STATE_HOME when it is an absolute path, else ~/.local/state (a
// relative or empty $XDG_STATE_HOME is ignored). A stateHome that is not
// an absolute path ("", an unset variable passed as found) gives "",
// which Open refuses ledger_write_failed: it put the ledger under the
// working directory, wherever the executor happened to start. A hostname
// byte outside [A-Za-z0-9._-] becomes "_" (so that the name stays one
// path element), and an empty hostname is "localhost".
func DefaultPath(stateHome, hostname string, uid int) string {
	if !filepath.IsAbs(stateHome) {
		return ""
	}
	if hostname == "" {
		hostname = "localhost"
	}
	h := []byte(hostname)
	for i, c := range h {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			h[i] = '_'
		}
	}
	name := string(h)
	if strings.Trim(name, ".") == "" {
		name = strings.ReplaceAll(name, ".", "_")
	}
	return filepath.Join(stateHome, "cruxprov", "receipts", name+"-"+strconv.Itoa(uid)+".jsonl")
}

// locked runs fn holding the exclusive flock of the ledger file, which
// every writer takes around checking the tail, repairing and appending.
func (l *Ledger) locked(ctx context.Context, fn func() error) error {
	wait := 50 * time.Microsecond
	for {
		err := unix.Flock(l.fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot lock receipts ledger %s", l.path)
		}
		select {
		case <-ctx.Done():
			return refusal.Wrap(refusal.LedgerWriteFailed, ctx.Err(), "waiting for the lock of receipts ledger %s", l.path)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
	defer unix.Flock(l.fd, unix.LOCK_UN)
	// The path must still name the file this Ledger has open: one moved
	// aside (a corrupt ledger, as docs/receipts.md advises) or replaced
	// would get rows nobody reads, and its sidecars (the repair journal)
	// are the new file's.
	var at, open unix.Stat_t
	if err := unix.Stat(l.side, &at); err != nil || unix.Fstat(l.fd, &open) != nil || at.Dev != open.Dev || at.Ino != open.Ino {
		moved := &MovedError{Path: l.path}
		l.broken = refusal.Wrap(refusal.LedgerWriteFailed, moved, "%s", moved.Error())
		return l.broken
	}
	return fn()
}

// MovedError is a Ledger's refusal once its path no longer names the
// file it has open (moved aside or replaced): what it wrote before, an
// intent whose outcome is then refused, say, is in the file that was
// moved, not in the one at Path now. A caller tells it apart with
// errors.As, never by its words.
type MovedError struct {
	Path string
}

func (e *MovedError) Error() string {
	return "receipts ledger " + e.Path + " was moved or replaced while this process had it open: nothing more is written to the file it had; open the ledger again"
}

// append writes b (whole rows) with one write(2) at the end of the
// ledger, syncs, and folds the rows. The flock is held and the ledger
// was synced, so the file ends at l.end with a newline. A failed or short
// write leaves at most a fragment that the next sync repairs; a failed
// sync breaks the Ledger (after a failed fsync the kernel may drop the
// dirty pages and a later fsync succeed: nothing more is trusted).
func (l *Ledger) append(ctx context.Context, b []byte) error {
	n, err := writeOnce(l.fd, b)
	if err == nil && n != len(b) {
		// A full file system or the file size limit writes what fits
		// and returns short without saying why: the rest, written once
		// more, gets the reason (ENOSPC, EDQUOT, EFBIG), which is what
		// tells the executor what to do. Whatever lands is cut off below.
		err = io.ErrShortWrite
		m, why := writeOnce(l.fd, b[n:])
		if why != nil {
			err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(b), why)
		}
		n += max(m, 0) // what landed, to cut off below
	}
	if err != nil {
		// A write cut short (a full disk, the file size limit) left a
		// part of the rows — all of one but its newline, say, which the
		// next Open would read as a whole intent of an attempt that
		// never spawned (an orphan "that may have run"). The caller is
		// told nothing was written: cut it off, as for a failed sync.
		if n > 0 {
			if terr := unix.Ftruncate(l.fd, l.end); terr != nil {
				l.broken = refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot append to receipts ledger %s, and the part written could not be cut off (%v): the next Open reads it", l.path, terr)
				return l.broken
			}
		}
		if a := writeAdvice(err); a != "" {
			return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot append to receipts ledger %s: %v%s", l.path, err, a)
		}
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot append to receipts ledger %s", l.path)
	}
	if err := fdatasync(l.fd); err != nil {
		// The caller is told the rows are not written, so they must not
		// be read back either: the next Open would take an intent whose
		// attempt never spawned for an orphan, and an ok outcome for one
		// to replay, from rows no sync made durable. Cut them off (the
		// flock is held: nothing follows them).
		if terr := unix.Ftruncate(l.fd, l.end); terr != nil {
			err = fmt.Errorf("%w; and the unsynced rows could not be cut off (%v): the next Open reads them", err, terr)
		}
		l.broken = refusal.Wrap(refusal.LedgerWriteFailed, err, "receipts ledger %s failed to sync; open it again", l.path)
		return l.broken
	}
	_, err = l.fold(ctx, l.end+int64(len(b)), false)
	return err
}

func writeOnce(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

func fdatasync(fd int) error {
	for {
		err := datasync(fd)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

// newAttemptID is an attempt id as docs/receipts.md gives its form, `att_`
// and 32 hex digits (128 random bits), as invoke's executors make them: one
// Begin made for an intent without one was the 32 digits alone.
func newAttemptID() string {
	var b [16]byte
	rand.Read(b[:])
	return "att_" + hex.EncodeToString(b[:])
}

// What to do about a ledger path Open cannot make or open, in the words
// of its refusal, which a Go executor reads (the command line adds its
// own where the file system's error says nothing of it): Open said only
// what the file system said.
const (
	notRegularAdvice = "a ledger is a regular file: move this away, and the ledger is made there anew, or open one at another path"
	notDirAdvice     = "a file stands where a directory of the ledger's path must be: move it away, or keep the ledger elsewhere"
	kernelFSAdvice   = "keep the ledger on another file system"
)

// openAdvice is what to do, after "; ", about a ledger file the file
// system would not open for appending (err), or "" where err says it
// itself. The words are the command line's where it has them, which
// adds them only where the refusal does not say them already.
func openAdvice(err error) string {
	switch {
	case errors.Is(err, unix.ENOTDIR):
		return "; " + notDirAdvice
	case errors.Is(err, unix.EACCES):
		return "; make the ledger and its directory writable by this user, or open a ledger where this user can write"
	case errors.Is(err, unix.EPERM):
		return "; an immutable attribute (lsattr) or a security module stops writes to the ledger: lift it"
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return "; free space on the ledger's file system (or raise its quota)"
	case errors.Is(err, unix.EROFS):
		return "; its file system is mounted read-only: remount it read-write, or keep the ledger on another"
	}
	return ""
}

// writeAdvice is what to do, after "; ", about an append to the ledger
// that the file system refused (err), or "" where err says it itself:
// a Go executor's run refused for a full disk said only "no space left
// on device", and only the command line said what to do.
func writeAdvice(err error) string {
	switch {
	case errors.Is(err, unix.EFBIG):
		return "; the ledger reached this process's file size limit (ulimit -f): raise it, or keep receipts in a new ledger"
	case errors.Is(err, unix.EIO):
		return "; the disk failed the write: check it (the kernel log says more) before running again"
	}
	return openAdvice(err)
}

// mkdirsAdvice is what to do about the directories of a ledger's path
// that mkdirs could not make (err).
func mkdirsAdvice(err error) string {
	switch {
	case errors.Is(err, unix.ENOTDIR):
		return notDirAdvice
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return "free space on that file system (or raise its quota), or keep the ledger on another"
	case errors.Is(err, unix.EROFS):
		return "that file system is mounted read-only: remount it read-write, or keep the ledger on another"
	}
	return "make the nearest directory there writable by this user, or keep the ledger in a directory this user can write"
}

// mkdirs creates dir and its missing parents with mode 0700 and syncs the
// parent of each directory it created.
func mkdirs(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/refusal"
)

// journalFormat is the format of the repair journal <path>.repair.
const journalFormat = "cruxprov.receipt-repair/v1"

// journal is the repair journal: the torn row that replaces the fragment
// at Offset. The row holds the fragment's bytes, so once the journal is
// durable the fragment may be overwritten.
type journal struct {
	Format string `json:"format"`
	Offset int64  `json:"offset"`
	Row    string `json:"row"`
}

// sync brings the Ledger up to date with its file: it folds the rows
// other writers appended, finishes an interrupted repair and repairs a
// torn tail. The flock is held.
func (l *Ledger) sync(ctx context.Context) error {
	size, err := l.size()
	if err != nil {
		return err
	}
	if _, err := os.Lstat(l.side + ".repair"); errors.Is(err, fs.ErrNotExist) {
		torn, err := l.fold(ctx, size, true)
		if err != nil || !torn {
			return err
		}
	}
	return l.withRepairLock(ctx, func() error {
		// Re-read everything: another writer may have repaired the tail
		// while this one waited for the lock.
		if err := l.recoverJournal(); err != nil {
			return err
		}
		size, err := l.size()
		if err != nil {
			return err
		}
		torn, err := l.fold(ctx, size, true)
		if err != nil || !torn {
			return err
		}
		if err := l.repairTail(size); err != nil {
			return err
		}
		if size, err = l.size(); err != nil {
			return err
		}
		if torn, err = l.fold(ctx, size, true); err == nil && torn {
			err = refusal.New(refusal.LedgerWriteFailed, "the tail of receipts ledger %s is still torn after its repair", l.path)
		}
		return err
	})
}

// size is the ledger file's size; it fails when the file is shorter than
// what was already read (someone truncated it).
func (l *Ledger) size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		return 0, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot stat receipts ledger %s", l.path)
	}
	if st.Size < l.end {
		return 0, refusal.New(refusal.LedgerCorrupt, "receipts ledger %s shrank to %d bytes, below the %d already read: it was truncated or replaced", l.path, st.Size, l.end)
	}
	return st.Size, nil
}

// fold reads the terminated lines in [l.end, to) into the joiner,
// advancing l.end. It reports whether an unterminated tail follows (an
// error unless allowTail). A bad line is refused ledger_corrupt.
func (l *Ledger) fold(ctx context.Context, to int64, allowTail bool) (bool, error) {
	if to <= l.end {
		return false, nil
	}
	lr := newLineReader(l.f, l.end, to, l.line+1)
	for {
		ln, err := lr.next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read receipts ledger %s", l.path)
		}
		if !ln.terminated {
			if !allowTail {
				return true, refusal.New(refusal.LedgerWriteFailed, "receipts ledger %s has an unterminated line after an append", l.path)
			}
			return true, nil
		}
		if cl := checkLine(l.j, l.path, ln); cl != nil {
			return false, corrupt(*cl)
		}
		if l.sum != nil {
			l.sum.Write(ln.b)
			l.sum.Write(newline)
		}
		l.end = lr.off
		l.line = ln.no
		if ln.no%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return false, refusal.Wrap(refusal.LedgerWriteFailed, err, "reading receipts ledger %s", l.path)
			}
		}
	}
}

var newline = []byte{'\n'}

// repairTail repairs the fragment [l.end, size): a complete record is
// terminated with "\n"; anything else is journaled, then overwritten in
// place by its torn row, then the journal is removed. The flock and the
// repair lock are held.
func (l *Ledger) repairTail(size int64) error {
	off, n := l.end, size-l.end
	if n > maxFragment {
		lr := newLineReader(l.f, off, size, l.line+1)
		ln, err := lr.next()
		if err != nil {
			return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read receipts ledger %s", l.path)
		}
		return corrupt(CorruptLine{Path: l.path, Line: ln.no, Offset: off, Length: ln.n, SHA256: ln.sum(),
			Reason: fmt.Sprintf("an unterminated tail of %d bytes, more than a torn row holds (%d)", n, maxFragment)})
	}
	frag := make([]byte, n)
	if _, err := l.f.ReadAt(frag, off); err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read the tail of receipts ledger %s", l.path)
	}
	if _, err := parseRow(frag); err == nil {
		// A complete record whose newline was lost: terminate it.
		if w, err := writeOnce(l.fd, []byte{'\n'}); err != nil || w != 1 {
			return refusal.Wrap(refusal.LedgerWriteFailed, errOr(err, io.ErrShortWrite), "cannot terminate the tail of receipts ledger %s", l.path)
		}
		if err := fdatasync(l.fd); err != nil {
			l.broken = refusal.Wrap(refusal.LedgerWriteFailed, err, "receipts ledger %s failed to sync; open it again", l.path)
			return l.broken
		}
		return nil
	}
	row := encodeTorn(off, frag, l.opts.Now())
	jb, _ := json.Marshal(journal{Format: journalFormat, Offset: off, Row: string(row[:len(row)-1])})
	if err := l.writeJournal(append(jb, '\n')); err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot write the repair journal of receipts ledger %s", l.path)
	}
	if err := l.writeAt(row, off); err != nil {
		return err
	}
	return l.removeJournal()
}

func errOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// maxJournal bounds what recoverJournal reads: a journal holds one torn
// row (at most MaxRow of fragment, base64: 4/3 of it) quoted as a JSON
// string, well under this.
const maxJournal = 4 * MaxRow

// recoverJournal finishes a repair a crash interrupted: the journal's torn
// row is put in place at its offset (unless it already is), then the
// journal is removed. The repair lock is held.
func (l *Ledger) recoverJournal() error {
	jp := l.side + ".repair"
	size, err := l.size()
	if err != nil {
		return err
	}
	j, found, done, err := judgeJournal(jp, l.path, l.f, size, l.end)
	if err != nil {
		return err
	}
	if !found {
		os.Remove(jp + ".tmp") // a journal never renamed: nothing was overwritten
		return nil
	}
	if !done {
		if err := l.writeAt(append([]byte(j.Row), '\n'), j.Offset); err != nil {
			return err
		}
	}
	return l.removeJournal()
}

// judgeJournal reads the repair journal jp of the ledger at path (f, of
// size bytes, read up to from) and judges it as a writer does before
// its first append, changing nothing: found is false when there is
// none; done when its torn row already stands at its offset; an error
// is what a writer refuses (the journal is left as it is): one it cannot
// read, ledger_write_failed; one that is not a journal it wrote, or names
// a repair rows were appended after, ledger_corrupt. receipts scan asks
// it too, so that a health check is told what the next run would be.
func judgeJournal(jp, path string, f io.ReaderAt, size, from int64) (j journal, found, done bool, err error) {
	// Capped, and only a regular file: a FIFO at the journal's path hung
	// every writer's Open in its read (SIGTERM too: the read never
	// returned), and a huge file was read whole into memory.
	b, err := capped.ReadFile(jp, maxJournal)
	if errors.Is(err, fs.ErrNotExist) {
		return journal{}, false, false, nil
	}
	bad := func(reason string) error {
		return refusal.New(refusal.LedgerCorrupt,
			"repair journal %s %s; it may hold the only copy of a torn fragment: move the ledger and the journal aside together",
			jp, reason).WithRemedy(refusal.ActionScanLedger, path)
	}
	if errors.Is(err, capped.ErrNotRegular) || errors.Is(err, capped.ErrTooLarge) {
		// Not a regular file, or larger than any journal this package
		// writes: not one of its journals.
		return journal{}, true, false, bad(fmt.Sprintf("is not a journal this writer reads (%v)", err))
	}
	if err != nil {
		return journal{}, true, false, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read repair journal %s", jp)
	}
	j, reason := parseRepairJournal(b)
	if reason != "" {
		return journal{}, true, false, bad(reason)
	}
	want := append([]byte(j.Row), '\n')
	end := j.Offset + int64(len(want))
	if j.Offset < from || j.Offset > size {
		return journal{}, true, false, bad("names offset " + strconv.FormatInt(j.Offset, 10) + ", outside the ledger's unread tail")
	}
	have := make([]byte, min(size, end)-j.Offset)
	if _, err := f.ReadAt(have, j.Offset); err != nil {
		return journal{}, true, false, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read receipts ledger %s", path)
	}
	if bytes.Equal(have, want) {
		return j, true, true, nil
	}
	if size > end {
		return journal{}, true, false, bad("names a repair, but rows follow it in the ledger")
	}
	return j, true, false, nil
}

// parseRepairJournal decodes a repair journal's bytes b: the journal, or
// why it is not one ("" when it is).
func parseRepairJournal(b []byte) (journal, string) {
	var j journal
	// No unknown member, no key twice, nothing after the object: which
	// of two offsets a repair would finish at, the journal must not leave
	// to the decoder.
	if err := strictjson.Decode(b, &j, false); err != nil || j.Format != journalFormat {
		return journal{}, "is not a " + journalFormat + " document"
	}
	r, err := parseRow([]byte(j.Row))
	if err != nil || r.torn == nil || r.torn.Offset != j.Offset {
		return journal{}, "does not hold a torn row for its offset"
	}
	return j, ""
}

func (l *Ledger) writeJournal(b []byte) error {
	jp := l.side + ".repair"
	f, err := os.OpenFile(jp+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(jp+".tmp", jp)
	}
	if err == nil {
		err = syncDir(filepath.Dir(l.side))
	}
	return err
}

func (l *Ledger) removeJournal() error {
	if err := os.Remove(l.side + ".repair"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot remove the repair journal of receipts ledger %s", l.path)
	}
	if err := syncDir(filepath.Dir(l.side)); err != nil {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "receipts ledger %s", l.path)
	}
	return nil
}

// writeAt writes b at off through a descriptor without O_APPEND (pwrite on
// an O_APPEND descriptor appends on Linux), checked to be the same file,
// and syncs it.
func (l *Ledger) writeAt(b []byte, off int64) error {
	fail := func(err error) error {
		return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot repair receipts ledger %s", l.path)
	}
	f, err := os.OpenFile(l.side, os.O_WRONLY, 0)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	var a, c unix.Stat_t
	if err := unix.Fstat(l.fd, &a); err != nil {
		return fail(err)
	}
	if err := unix.Fstat(int(f.Fd()), &c); err != nil {
		return fail(err)
	}
	if a.Dev != c.Dev || a.Ino != c.Ino {
		return fail(errors.New("the path no longer names the opened ledger"))
	}
	if _, err := f.WriteAt(b, off); err != nil {
		return fail(err)
	}
	if err := fdatasync(int(f.Fd())); err != nil {
		l.broken = refusal.Wrap(refusal.LedgerWriteFailed, err, "receipts ledger %s failed to sync; open it again", l.path)
		return l.broken
	}
	return nil
}

// withRepairLock runs fn holding the repair lock <path>.lock: a file its
// holder creates with O_EXCL and flocks for as long as it holds it.
//
// Every repairer holds the ledger's flock (sync runs only under it), so a
// lock file found here is no repairer of this ledger file: it was left by a
// writer that died (the kernel dropped its flock), whatever its mtime says
// (an old one, or one in the future after a clock step or a touch), and
// is taken over at once. The flock on the lock file itself keeps that
// fail-closed where the ledger's flock cannot: a writer that still holds
// a ledger file since renamed aside, repairing it under the same lock
// path, is alive, and is waited for (until ctx ends).
func (l *Ledger) withRepairLock(ctx context.Context, fn func() error) error {
	lp := l.side + ".lock"
	for {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err == nil {
			held, err := holdRepairLock(f, lp)
			if err != nil {
				f.Close()
				return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot take the repair lock %s", lp)
			}
			if !held {
				// Taken for a dead writer's between its create and its
				// flock: start again.
				f.Close()
				continue
			}
			fmt.Fprintf(f, "%d %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
			// Removed while still flocked, so that no one takes the
			// path's next lock for a dead one's.
			defer func() { os.Remove(lp); f.Close() }()
			return fn()
		}
		if !errors.Is(err, fs.ErrExist) {
			return refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot take the repair lock %s", lp)
		}
		broken, err := breakRepairLock(lp)
		if err != nil {
			return repairLockRefusal(lp, err)
		}
		if broken {
			continue
		}
		select {
		case <-ctx.Done():
			return refusal.Wrap(refusal.LedgerWriteFailed, ctx.Err(), "waiting for the repair lock %s, which a live writer holds", lp)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// holdRepairLock flocks f, the lock file just created at lp, and reports
// whether lp still names it (a writer that found it before the flock
// may have taken it for a dead writer's and removed it). A breaker
// holds the flock only while it checks, so waiting for it is brief.
func holdRepairLock(f *os.File, lp string) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return false, err
		}
	}
	return sameFile(f, lp)
}

// breakRepairLock removes the lock file at lp when no one holds its
// flock, and reports whether the caller should try to create it again
// (it was removed, or was already gone).
func breakRepairLock(lp string) (bool, error) {
	// Without blocking: a FIFO at lp hung the repair (and the run) in
	// open(2), SIGTERM included.
	f, err := openRepairLock(lp)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.EWOULDBLOCK {
		return false, nil // a live writer holds it
	}
	if err != nil {
		return false, err
	}
	if same, err := sameFile(f, lp); err != nil || !same {
		return true, err // someone else broke it, or took it anew
	}
	if err := os.Remove(lp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// openRepairLock opens the lock file at lp to look at its flock: a
// regular file, opened without blocking and without following a link.
func openRepairLock(lp string) (*os.File, error) {
	f, err := os.OpenFile(lp, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		// O_NOFOLLOW's refusal of a symbolic link ("too many levels of
		// symbolic links") is said as what it is.
		if st, lerr := os.Lstat(lp); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is %s", lp, filekind.NotRegular(st.Mode()))
		}
	}
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, err
		}
		// Which kind ("a directory, not a regular file"): "not a
		// regular file" alone left the operator to find out what was
		// in the way of the repair.
		return nil, fmt.Errorf("%s is %s", lp, filekind.NotRegular(st.Mode()))
	}
	return f, nil
}

// repairLockRefusal is a writer's refusal of a repair lock it cannot
// look at (err: why).
func repairLockRefusal(lp string, err error) error {
	return refusal.Wrap(refusal.LedgerWriteFailed, err,
		"cannot tell whether the repair lock %s is held; remove it if no cruxprov writes this ledger", lp)
}

// sameFile reports whether path names the file f has open.
func sameFile(f *os.File, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &b); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

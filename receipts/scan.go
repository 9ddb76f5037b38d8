package receipts

import (
	"bufio"
	"bytes"
	"context"
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
	"syscall"
	"time"

	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/refusal"
)

// ScanOptions tune Scan.
type ScanOptions struct {
	// TolerateCorrupt returns bad lines in ScanResult.Corrupt and goes on,
	// instead of failing at the first one.
	TolerateCorrupt bool
}

// ScanResult is what a scan of one or several ledgers found.
type ScanResult struct {
	// Attempts is every intent, in the order of the paths and then of the
	// lines, each joined with the outcome that names its own attempt_id
	// (nil when it has none).
	Attempts []Attempt
	// Orphans are the attempts without an outcome (a crash, a kill, or an
	// invocation still running), in the same order.
	Orphans []Attempt
	// Unmatched are outcomes whose attempt_id no scanned intent has.
	Unmatched []Located[Outcome]
	// Torn are the quarantined fragments.
	Torn []Torn
	// Tails are unterminated tails no writer has repaired yet (a writer
	// crashed, or is writing the line now); they are not corruption.
	Tails []Fragment
	// Corrupt are the bad lines (TolerateCorrupt only).
	Corrupt []CorruptLine
	// Repairs are the repair journals beside the ledgers: a repair a
	// writer was killed in. The next writer finishes one without a
	// Reason; one with a Reason it refuses (TolerateCorrupt only: a
	// strict scan refuses it as the writer would).
	Repairs []Repair
}

// Repair is a ledger's repair journal <path>.repair, left by a writer
// killed while it quarantined a torn tail.
type Repair struct {
	Path    string `json:"path"`             // the ledger
	Journal string `json:"journal"`          // the journal's path
	Offset  int64  `json:"offset"`           // where its torn row goes; -1 when it cannot be read as a journal
	Reason  string `json:"reason,omitempty"` // why the next writer refuses it (ledger_corrupt); "" when it finishes the repair
}

// Attempt is an intent joined with its own outcome.
type Attempt struct {
	Intent  Intent
	Outcome *Outcome // nil: an orphan
	Path    string   // the ledger of the intent
	Line    int      // the intent's line, from 1
}

// Located is a value with the ledger line it was read from.
type Located[T any] struct {
	Value T      `json:"value"`
	Path  string `json:"path"`
	Line  int    `json:"line"`   // from 1
	Off   int64  `json:"offset"` // byte offset of the line
}

// Torn is a fragment quarantined by a writer's repair: the exact bytes
// that stood after the ledger's last newline, and their digest.
type Torn struct {
	Path       string    `json:"path"`
	Line       int       `json:"line"`   // the torn row's line, from 1
	Offset     int64     `json:"offset"` // where the fragment began (the torn row replaced it there)
	Bytes      []byte    `json:"bytes"`  // base64 in JSON
	SHA256     string    `json:"sha256"` // "sha256:<hex>" of Bytes
	RepairedAt time.Time `json:"repaired_at"`
}

// Fragment is an unterminated ledger tail.
type Fragment struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Bytes  []byte `json:"bytes"` // base64 in JSON
	SHA256 string `json:"sha256"`
}

// CorruptLine is one bad line of a ledger.
type CorruptLine struct {
	Path   string `json:"path"`
	Line   int    `json:"line"`   // from 1
	Offset int64  `json:"offset"` // byte offset of the line's first byte
	Length int64  `json:"length"` // bytes, without the newline
	SHA256 string `json:"sha256"` // "sha256:<hex>" of those bytes
	Reason string `json:"reason"`
	Bytes  []byte `json:"bytes"` // the bad bytes, base64 in JSON (nil when the line is longer than a row can be)
	// AlsoIn is the other ledger given to the same scan that holds this
	// line's attempt too (a ledger and its copy), when that is what is
	// wrong: each alone may be sound.
	AlsoIn string `json:"also_in,omitempty"`
}

// CorruptError is a strict scan's failure: the first bad line. It is
// returned wrapped in a *refusal.Error with code ledger_corrupt; match it
// with errors.As.
type CorruptError struct {
	CorruptLine
}

// Error says where the line is and what is wrong with it.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: line %d at byte offset %d (%d bytes, %s): %s",
		e.Path, e.Line, e.Offset, e.Length, e.SHA256, e.Reason)
}

// NotRegularError is Scan's error, and the cause of Open's
// ledger_write_failed, for a ledger path that names no regular file (a
// directory, a FIFO, a device): a caller can tell it from a ledger it
// could not read or write.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("receipts: %s is %s", e.Path, filekind.NotRegular(e.Mode))
}

// Kind says what the path is: "a directory", "a FIFO (named pipe)", "a
// socket", "a device", or "not a regular file" for any other kind. A
// FIFO named as a ledger was said to be "not a regular file", which the
// one who made it may not recognise.
func (e *NotRegularError) Kind() string { return filekind.Of(e.Mode) }

// Is matches refusal.LedgerCorrupt, so errors.Is works on a bare
// *CorruptError too.
func (e *CorruptError) Is(target error) bool { return target == refusal.LedgerCorrupt }

func corrupt(cl CorruptLine) error {
	if cl.AlsoIn != "" {
		return refusal.Wrap(refusal.LedgerCorrupt, &CorruptError{cl},
			"receipts ledgers %s and %s hold the same attempt (one a copy of the other?): scan them one at a time", cl.AlsoIn, cl.Path).WithRemedy(refusal.ActionScanLedger, cl.Path)
	}
	return refusal.Wrap(refusal.LedgerCorrupt, &CorruptError{cl},
		"receipts ledger %s is corrupt (list its bad lines with a tolerant scan; move it aside to start a new one)", cl.Path).WithRemedy(refusal.ActionScanLedger, cl.Path)
}

// Scan reads the ledgers at paths, in order, and joins every intent with
// its own outcome across all of them. It takes no lock: it reads each
// file up to its size when opened, and an unterminated tail is reported in
// Tails, not as corruption. A missing or unreadable file is an error.
func Scan(ctx context.Context, paths []string, opts ScanOptions) (*ScanResult, error) {
	j := newJoiner()
	res := &ScanResult{}
	var seen []os.FileInfo // a ledger named twice is read once
	for _, p := range paths {
		if err := scanFile(ctx, p, j, res, opts, &seen); err != nil {
			return nil, err
		}
	}
	j.result(res)
	return res, nil
}

func scanFile(ctx context.Context, path string, j *joiner, res *ScanResult, opts ScanOptions, seen *[]os.FileInfo) error {
	// Without blocking: a FIFO named as a ledger hung the scan in open(2)
	// until a writer came (receipts list|scan|show, SIGTERM included); it
	// is refused below as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// A unix socket is not opened at all (ENXIO, "no such device or
		// address"): it is no ledger either, and said so.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return &NotRegularError{Path: path, Mode: st.Mode()}
		}
		return fmt.Errorf("receipts: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	for _, o := range *seen {
		if os.SameFile(o, st) {
			return nil
		}
	}
	*seen = append(*seen, st)
	if !st.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: st.Mode()}
	}
	// The repair journal first, as a writer reads it before the rows.
	side, journal, err := scanJournal(f, path, res, opts)
	if err != nil {
		return err
	}
	lr := newLineReader(f, 0, st.Size(), 1)
	tail := false // an unterminated tail a writer would repair
	for {
		if lr.line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ln, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("receipts: %s: %w", path, err)
		}
		if !ln.terminated {
			// A tail: a complete record is taken as a row (a repair would
			// terminate it); anything else is pending. One longer than a
			// torn row holds is no fragment of a row: the writer refuses
			// it ledger_corrupt (repairTail), and so does the scan. It
			// was listed as a tail "the next writer quarantines", exit 0,
			// while every run was refused.
			if ln.n > maxFragment {
				cl := CorruptLine{Path: path, Line: ln.no, Offset: ln.off, Length: ln.n, SHA256: ln.sum(),
					Reason: fmt.Sprintf("an unterminated tail of %d bytes, more than a torn row holds (%d)", ln.n, maxFragment)}
				if !ln.long {
					cl.Bytes = bytes.Clone(ln.b)
				}
				if err := res.bad(cl, opts); err != nil {
					return err
				}
				break
			}
			if ln.long {
				res.Tails = append(res.Tails, Fragment{Path: path, Offset: ln.off, SHA256: ln.sum()})
				tail = true
				break
			}
			if r, err := j.p.parse(ln.b); err == nil {
				if cl := j.add(r, path, ln); cl != nil {
					if err := res.bad(*cl, opts); err != nil {
						return err
					}
				}
				break
			}
			res.Tails = append(res.Tails, Fragment{Path: path, Offset: ln.off, Bytes: bytes.Clone(ln.b), SHA256: ln.sum()})
			tail = true
			break
		}
		cl := checkLine(j, path, ln)
		if cl != nil {
			if err := res.bad(*cl, opts); err != nil {
				return err
			}
		}
	}
	if !journal && !tail {
		return nil
	}
	// A repair is due: the writer looks at the repair lock.
	lp := side + ".lock"
	lf, err := openRepairLock(lp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, fs.ErrPermission) && !ownMine(st) {
		return nil // another user's ledger: as for its journal
	}
	if err != nil {
		return repairLockRefusal(lp, err)
	}
	return lf.Close()
}

// ownMine reports whether this process's user owns the file of st.
func ownMine(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || int(sys.Uid) == os.Geteuid()
}

// scanJournal looks at the repair journal of the ledger at path (f) as
// its next writer will, changing nothing: it is reported in res.Repairs,
// or refused as the writer refuses it (a tolerant scan reports a
// ledger_corrupt one with its reason). It returns the ledger's own path
// (links resolved: the sidecars' stem) and whether there is a journal.
// A scan that said all was well while every run was refused left a
// health check blind. (When a repair is due, the caller looks at the
// repair lock too: one the writer cannot look at refuses the run.)
func scanJournal(f *os.File, path string, res *ScanResult, opts ScanOptions) (string, bool, error) {
	side, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot resolve receipts ledger %s", path)
	}
	st, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("receipts: %w", err)
	}
	jp := side + ".repair"
	j, found, _, err := judgeJournal(jp, path, f, st.Size(), 0)
	if errors.Is(err, fs.ErrPermission) && !ownMine(st) {
		// Another user's ledger (an auditor reading it): its writer's
		// sidecars are its own (0600), and its next run is not this
		// user's to predict.
		return side, false, nil
	}
	switch {
	case err != nil && opts.TolerateCorrupt && errors.Is(err, refusal.LedgerCorrupt):
		reason := err.Error()
		var re *refusal.Error
		if errors.As(err, &re) {
			reason = re.Message()
		}
		res.Repairs = append(res.Repairs, Repair{Path: path, Journal: jp, Offset: -1, Reason: reason})
	case err != nil:
		return "", false, err
	case found:
		res.Repairs = append(res.Repairs, Repair{Path: path, Journal: jp, Offset: j.Offset})
	}
	return side, found, nil
}

// checkLine parses one terminated line and folds it into j, returning the
// corruption it found, if any.
func checkLine(j *joiner, path string, ln line) *CorruptLine {
	if ln.long {
		return &CorruptLine{Path: path, Line: ln.no, Offset: ln.off, Length: ln.n, SHA256: ln.sum(),
			Reason: fmt.Sprintf("line longer than %d bytes", maxLine)}
	}
	r, err := j.p.parse(ln.b)
	if err != nil {
		return &CorruptLine{Path: path, Line: ln.no, Offset: ln.off, Length: ln.n, SHA256: ln.sum(),
			Reason: err.Error(), Bytes: bytes.Clone(ln.b)}
	}
	return j.add(r, path, ln)
}

func (res *ScanResult) bad(cl CorruptLine, opts ScanOptions) error {
	if !opts.TolerateCorrupt {
		return corrupt(cl)
	}
	res.Corrupt = append(res.Corrupt, cl)
	return nil
}

// line is one line read from a ledger.
type line struct {
	b          []byte // without the newline; nil when long
	no         int    // from 1
	off        int64
	n          int64 // length without the newline
	long       bool  // longer than maxLine: only n and sum are known
	terminated bool
	longSum    string // a long line's sha256, hashed as it streamed past
}

// sum is the line's "sha256:<hex>", for the reports that name a line by
// its bytes' digest. It is computed when asked for: a scan asks only of
// the lines it reports.
func (ln line) sum() string {
	if ln.long {
		return ln.longSum
	}
	s := sha256.Sum256(ln.b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// lineReader reads lines from a file region [off, end).
type lineReader struct {
	r    *bufio.Reader
	off  int64
	end  int64
	line int
	buf  []byte
}

func newLineReader(f io.ReaderAt, off, end int64, firstLine int) *lineReader {
	return &lineReader{
		r:    bufio.NewReaderSize(io.NewSectionReader(f, off, end-off), 64<<10),
		off:  off,
		end:  end,
		line: firstLine - 1,
	}
}

// next returns the next line, or io.EOF at the end of the region. The
// line's bytes are valid until the next call.
func (lr *lineReader) next() (line, error) {
	if lr.off >= lr.end {
		return line{}, io.EOF
	}
	lr.line++
	ln := line{no: lr.line, off: lr.off}
	var h hash.Hash // a long line's, from the moment it is long
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		data := chunk
		if err == nil {
			data = chunk[:len(chunk)-1]
			ln.terminated = true
		}
		ln.n += int64(len(data))
		switch {
		case ln.long:
			h.Write(data)
		case int64(len(lr.buf))+int64(len(data)) > maxLine:
			ln.long = true
			h = sha256.New()
			h.Write(lr.buf)
			h.Write(data)
			lr.buf = lr.buf[:0]
		default:
			lr.buf = append(lr.buf, data...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return line{}, err
		}
		break
	}
	lr.off += ln.n
	if ln.terminated {
		lr.off++
	}
	if ln.long {
		ln.longSum = "sha256:" + hex.EncodeToString(h.Sum(nil))
	} else {
		ln.b = lr.buf
	}
	return ln, nil
}

// joiner folds rows into attempts: an outcome resolves only the attempt
// its attempt_id names. A second intent or a second outcome for one
// attempt is corruption.
type joiner struct {
	attempts map[string]*Attempt
	order    []*Attempt     // every attempt in ledger order; a lean joiner keeps none
	done     map[string]int // lean: finished attempts no key state points at -> their intent's line
	stray    map[string]*strayRow
	strays   []string
	keys     map[string]*keyState
	torn     []Torn
	p        rowParser
	// lean is a Ledger's joiner: of a finished attempt no key state points
	// at it keeps the id and line (done); of the others the id, the line,
	// whether it has an outcome, the key while it has none, and of a key's
	// first attempt the request Begin compares others with; no torn rows
	// and no order. An executor that stays up for a million runs holds
	// that much per run, not whole receipts.
	lean bool
}

// keyState is what the ledger knows of one idempotency key.
type keyState struct {
	first    *Attempt // the first intent under the key
	ok       *Attempt // the first attempt with an ok outcome
	okRow    rowRef   // where ok's outcome row is: a replay reads it back (a Ledger keeps no outcome)
	last     *Attempt // the latest intent under the key
	attempts int
}

// rowRef is where a row is in its ledger: its offset and length (without
// the newline).
type rowRef struct{ off, n int64 }

// strayRow is an outcome read before (or without) its intent.
type strayRow struct {
	Located[Outcome]
	n int64 // the row's length
}

func newJoiner() *joiner {
	return &joiner{attempts: map[string]*Attempt{}, stray: map[string]*strayRow{}, keys: map[string]*keyState{}}
}

// newLeanJoiner is a Ledger's (see lean).
func newLeanJoiner() *joiner {
	j := newJoiner()
	j.lean, j.done = true, map[string]int{}
	return j
}

// known reports whether the joiner has read an intent for attempt id.
func (j *joiner) known(id string) bool {
	_, live := j.attempts[id]
	_, done := j.done[id]
	return live || done
}

func (j *joiner) add(r row, path string, ln line) *CorruptLine {
	bad := func(reason string) *CorruptLine {
		return &CorruptLine{Path: path, Line: ln.no, Offset: ln.off, Length: ln.n, SHA256: ln.sum(), Reason: reason, Bytes: bytes.Clone(ln.b)}
	}
	switch {
	case r.intent != nil:
		id := r.intent.AttemptID
		if first, dup := j.attempts[id]; dup {
			cl := bad(fmt.Sprintf("a second intent for attempt %s (the first: %s line %d)", id, first.Path, first.Line))
			if first.Path != path {
				cl.AlsoIn = first.Path
			}
			return cl
		}
		if line, dup := j.done[id]; dup { // lean: one ledger, this path
			return bad(fmt.Sprintf("a second intent for attempt %s (the first: %s line %d)", id, path, line))
		}
		a := &Attempt{Intent: *r.intent, Path: path, Line: ln.no}
		if j.lean {
			a.Intent = Intent{AttemptID: id, IdempotencyKey: r.intent.IdempotencyKey}
		}
		j.attempts[id] = a
		if !j.lean {
			j.order = append(j.order, a)
		}
		var out rowRef
		if s, ok := j.stray[id]; ok {
			delete(j.stray, id)
			a.Outcome = &s.Value
			out = rowRef{s.Off, s.n}
		}
		if k := a.Intent.IdempotencyKey; k != "" {
			ks := j.keys[k]
			if ks == nil {
				ks = &keyState{first: a}
				j.keys[k] = ks
				// What Begin compares a request under the key with.
				a.Intent.InputDigest, a.Intent.Provider, a.Intent.Entrypoint = r.intent.InputDigest, r.intent.Provider, r.intent.Entrypoint
			}
			ks.attempts++
			old := ks.last
			ks.last = a
			j.noteOK(a, out)
			if old != nil {
				j.retire(old, ks)
			}
		}
		j.elide(a)
	case r.outcome != nil:
		id := r.outcome.AttemptID
		if a, ok := j.attempts[id]; ok {
			if a.Outcome != nil {
				return bad(fmt.Sprintf("a second outcome for attempt %s", id))
			}
			a.Outcome = r.outcome
			j.noteOK(a, rowRef{ln.off, ln.n})
			j.elide(a)
			return nil
		}
		if _, dup := j.done[id]; dup {
			return bad(fmt.Sprintf("a second outcome for attempt %s", id))
		}
		if _, dup := j.stray[id]; dup {
			return bad(fmt.Sprintf("a second outcome for attempt %s", id))
		}
		j.stray[id] = &strayRow{Located[Outcome]{Value: *r.outcome, Path: path, Line: ln.no, Off: ln.off}, ln.n}
		j.strays = append(j.strays, id)
	case r.torn != nil && !j.lean:
		j.torn = append(j.torn, Torn{Path: path, Line: ln.no, Offset: r.torn.Offset,
			Bytes: r.torn.Bytes, SHA256: r.torn.SHA256, RepairedAt: r.torn.RepairedAt})
	}
	return nil
}

// elide drops, in a lean joiner, what Begin and Finish do not read of an
// attempt once it has its outcome: the outcome itself (a replay reads the
// ok one back from its row, keyState.okRow) and its key.
func (j *joiner) elide(a *Attempt) {
	if j.lean && a.Outcome != nil {
		a.Outcome = elided
		ks := j.keys[a.Intent.IdempotencyKey]
		if ks == nil || ks.first != a {
			a.Intent.IdempotencyKey = ""
		}
		j.retire(a, ks)
	}
}

// retire moves a finished attempt that no key state points at (ks is its
// key's, nil for none) from attempts to done, in a lean joiner: its id
// and line are all that is asked of it again.
func (j *joiner) retire(a *Attempt, ks *keyState) {
	if !j.lean || a.Outcome == nil || ks != nil && (ks.first == a || ks.last == a || ks.ok == a) {
		return
	}
	delete(j.attempts, a.Intent.AttemptID)
	j.done[a.Intent.AttemptID] = a.Line
}

// noteOK remembers the first ok outcome under an attempt's key (a replayed
// ok counts as ok: it replays the same original), and where its row is.
func (j *joiner) noteOK(a *Attempt, out rowRef) {
	k := a.Intent.IdempotencyKey
	if k == "" || a.Outcome == nil || a.Outcome.Status != StatusOK {
		return
	}
	if ks := j.keys[k]; ks != nil && ks.ok == nil {
		ks.ok, ks.okRow = a, out
	}
}

func (j *joiner) result(res *ScanResult) {
	res.Attempts = slices.Grow(res.Attempts, len(j.order))
	for _, a := range j.order {
		res.Attempts = append(res.Attempts, *a)
		if a.Outcome == nil {
			res.Orphans = append(res.Orphans, *a)
		}
	}
	for _, id := range j.strays {
		if s, ok := j.stray[id]; ok {
			res.Unmatched = append(res.Unmatched, s.Located)
		}
	}
	res.Torn = append(res.Torn, j.torn...)
}

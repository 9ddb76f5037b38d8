package receipts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/refusal"
)

// A checkpoint, <path>.checkpoint, is what a Ledger knows after reading a
// ledger's first bytes, so that the next Open reads only the rows after
// them. It is a cache: Open trusts it only when the sha256 of the ledger's
// first Offset bytes is the one it names, which it checks by hashing them
// (8–10× cheaper than parsing them), and anything else about it (missing,
// short, damaged, of another ledger, written before a rotation) makes Open
// read the whole ledger strictly, as without it, and write a new one. So a
// change to a byte the checkpoint covers is found as before: the hash
// differs, the full read meets the bad line and refuses it ledger_corrupt
// with its line and offset.
//
// The layout (integers as unsigned varints, a string as its length then
// its bytes, all of it followed by the sha256 of what precedes):
//
//	magic "cruxprov.receipt-checkpoint/v1\n"
//	offset, lines, the 32-byte sha256 of the ledger's bytes [0, offset)
//	attempts: count; each: attempt id, intent line, 1 if it has an
//	    outcome (else 0), and its idempotency key when it has none (an
//	    outcome yet to come makes its key's first ok); in no set order
//	    (a Ledger keeps none)
//	keys: count; each: the key, its first attempt (its index in the
//	    attempts above), that attempt's input digest, provider and
//	    entrypoint, the number of attempts, the last attempt, the first
//	    ok attempt (its index + 1; 0: none) and then the offset and length
//	    of that attempt's outcome row (read from the ledger when a replay
//	    needs it)
//	outcomes without an intent: count; each: attempt id, line, offset and
//	    length of its row (read back at load: they are rare)
//
// It holds no torn rows and no attempt's fields beyond those: Begin and
// Finish need nothing more, and Scan does not read checkpoints.
const checkpointMagic = "cruxprov.receipt-checkpoint/v1\n"

// checkpointMin and checkpointShare decide when Open writes a checkpoint:
// when it read at least checkpointMin bytes of rows past the one it loaded,
// and at least 1/checkpointShare of the ledger. Each Open then parses at
// most about that share of the ledger; writing one costs a few ms per
// 10,000 attempts, once every ledger-size/32 bytes of receipts.
var (
	checkpointMin   int64 = 64 << 10
	checkpointShare int64 = 32
)

// elided is the outcome of an attempt that has one, in a Ledger, which
// keeps no outcome in memory: a replay reads the ok one from its row
// (okAttempt).
var elided = &Outcome{}

func (l *Ledger) checkpointPath() string { return l.side + ".checkpoint" }

// loadCheckpoint starts the Ledger from its checkpoint when there is a
// good one for this file. The flock is held and nothing is folded yet.
func (l *Ledger) loadCheckpoint(ctx context.Context, size int64) {
	if _, err := os.Lstat(l.side + ".repair"); !errors.Is(err, fs.ErrNotExist) {
		return // an interrupted repair is finished from the start, as always
	}
	// Each attempt, key and outcome in a checkpoint takes fewer bytes
	// than its row: one larger than the ledger is no checkpoint of it.
	b, err := capped.ReadFile(l.checkpointPath(), size+4096)
	if err != nil {
		return
	}
	c, err := decodeCheckpoint(b)
	if err != nil || c.offset > size {
		return
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < c.offset; {
		if ctx.Err() != nil {
			return
		}
		n := min(int64(len(buf)), c.offset-off)
		if _, err := l.f.ReadAt(buf[:n], off); err != nil {
			return
		}
		h.Write(buf[:n])
		off += n
	}
	if !bytes.Equal(h.Sum(nil), c.prefix[:]) {
		return
	}
	j, err := c.joiner(l)
	if err != nil {
		return
	}
	l.j, l.end, l.line, l.sum, l.ckptAt = j, c.offset, c.lines, h, c.offset
}

// writeCheckpoint writes one for what the Ledger has read, when enough
// was read since the last (see checkpointMin). The flock is held. It is
// written to a temporary file and renamed, not synced: a checkpoint a
// crash damaged fails its own sha256 and is not used. A failure to write
// one costs the next Open its time, nothing else, and is not an error.
func (l *Ledger) writeCheckpoint() {
	read := l.end - l.ckptAt
	if l.sum == nil || read < checkpointMin || read < l.end/checkpointShare {
		return
	}
	// Opened first: where it cannot be written (a directory this user
	// may not write), nothing is encoded for nothing.
	tmp := l.checkpointPath() + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	_, err = f.Write(l.encodeCheckpoint())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.checkpointPath())
	}
	if err != nil {
		os.Remove(tmp)
		return
	}
	l.ckptAt = l.end
}

func (l *Ledger) encodeCheckpoint() []byte {
	j := l.j
	b := make([]byte, 0, 64+(len(j.done)+len(j.attempts))*48+len(j.keys)*160)
	b = append(b, checkpointMagic...)
	b = binary.AppendUvarint(b, uint64(l.end))
	b = binary.AppendUvarint(b, uint64(l.line))
	b = l.sum.Sum(b)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	// Every attempt: the finished ones no key state points at (done),
	// then the others, which keys name by their place in this list.
	b = binary.AppendUvarint(b, uint64(len(j.done)+len(j.attempts)))
	for id, line := range j.done {
		str(id)
		b = binary.AppendUvarint(b, uint64(line))
		b = append(b, 1)
	}
	index := make(map[*Attempt]int, len(j.attempts))
	for _, a := range j.attempts {
		index[a] = len(j.done) + len(index)
		str(a.Intent.AttemptID)
		b = binary.AppendUvarint(b, uint64(a.Line))
		if a.Outcome != nil {
			b = append(b, 1)
		} else {
			b = append(b, 0)
			str(a.Intent.IdempotencyKey)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(j.keys)))
	for k, ks := range j.keys {
		str(k)
		f := &ks.first.Intent
		b = binary.AppendUvarint(b, uint64(index[ks.first]))
		str(f.InputDigest)
		str(f.Provider)
		str(f.Entrypoint)
		b = binary.AppendUvarint(b, uint64(ks.attempts))
		b = binary.AppendUvarint(b, uint64(index[ks.last]))
		if ks.ok == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(index[ks.ok]+1))
			b = binary.AppendUvarint(b, uint64(ks.okRow.off))
			b = binary.AppendUvarint(b, uint64(ks.okRow.n))
		}
	}
	var strays []*strayRow
	for _, id := range j.strays {
		if s, ok := j.stray[id]; ok {
			strays = append(strays, s)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(strays)))
	for _, s := range strays {
		str(s.Value.AttemptID)
		b = binary.AppendUvarint(b, uint64(s.Line))
		b = binary.AppendUvarint(b, uint64(s.Off))
		b = binary.AppendUvarint(b, uint64(s.n))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// checkpoint is a decoded checkpoint, its rows not yet joined.
type checkpoint struct {
	offset   int64
	lines    int
	prefix   [sha256.Size]byte
	attempts []ckAttempt
	keys     []ckKey
	strays   []ckStray
}

type ckAttempt struct {
	id, key string
	line    int
	done    bool
}

type ckKey struct {
	key, input, provider, entrypoint string
	first, last, ok, attempts        int // ok: index + 1, 0 for none
	okRow                            rowRef
}

type ckStray struct {
	id   string
	line int
	row  rowRef
}

var errCheckpoint = errors.New("not a checkpoint")

// ckReader reads a checkpoint's fields from b, whose copy s its strings
// share (one allocation for all of them); its first error sticks.
type ckReader struct {
	b   []byte
	s   string
	i   int
	err error
}

func (r *ckReader) uint(max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 || v > max {
		r.err = errCheckpoint
		return 0
	}
	r.i += n
	return v
}

func (r *ckReader) left() int { return len(r.b) - r.i }

// count reads a count of items each at least min bytes long.
func (r *ckReader) count(min int) int { return int(r.uint(uint64(r.left() / min))) }

func (r *ckReader) str() string {
	n := int(r.uint(uint64(r.left())))
	if r.err == nil && n > r.left() {
		r.err = errCheckpoint
	}
	if r.err != nil {
		return ""
	}
	s := r.s[r.i : r.i+n]
	r.i += n
	return s
}

func (r *ckReader) byte() byte {
	if r.err == nil && r.left() == 0 {
		r.err = errCheckpoint
	}
	if r.err != nil {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < len(checkpointMagic)+sha256.Size || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errCheckpoint
	}
	body := b[:len(b)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], b[len(body):]) {
		return nil, errCheckpoint
	}
	r := &ckReader{b: body, s: string(body), i: len(checkpointMagic)}
	c := &checkpoint{}
	c.offset = int64(r.uint(math.MaxInt64))
	c.lines = int(r.uint(uint64(c.offset)))
	if r.err != nil || r.left() < sha256.Size {
		return nil, errCheckpoint
	}
	r.i += copy(c.prefix[:], r.b[r.i:])
	line := func() int { return int(r.uint(uint64(c.lines))) }
	row := func() rowRef {
		off := int64(r.uint(uint64(c.offset)))
		return rowRef{off, int64(r.uint(uint64(c.offset - off)))}
	}
	c.attempts = make([]ckAttempt, r.count(3))
	for i := range c.attempts {
		a := &c.attempts[i]
		a.id = r.str()
		a.line = line()
		switch r.byte() {
		case 1:
			a.done = true
		case 0:
			a.key = r.str()
		default:
			r.err = errCheckpoint
		}
	}
	n := uint64(len(c.attempts))
	c.keys = make([]ckKey, r.count(9))
	if n == 0 && len(c.keys) > 0 {
		return nil, errCheckpoint
	}
	for i := range c.keys {
		k := &c.keys[i]
		k.key = r.str()
		k.first = int(r.uint(n - 1))
		k.input, k.provider, k.entrypoint = r.str(), r.str(), r.str()
		k.attempts = int(r.uint(n))
		k.last = int(r.uint(n - 1))
		if k.ok = int(r.uint(n)); k.ok != 0 {
			k.okRow = row()
		}
	}
	c.strays = make([]ckStray, r.count(4))
	for i := range c.strays {
		s := &c.strays[i]
		s.id = r.str()
		s.line = line()
		s.row = row()
	}
	if r.err != nil || r.left() != 0 {
		return nil, errCheckpoint
	}
	return c, nil
}

// joiner rebuilds what a Ledger's joiner held after reading the
// checkpoint's bytes of l, reading back the rows of its outcomes without
// an intent. Anything inconsistent is an error (the checkpoint is not
// used).
func (c *checkpoint) joiner(l *Ledger) (*joiner, error) {
	// The attempts a key names are kept whole (as a lean joiner keeps
	// them); the other finished ones by id and line only.
	named := make([]bool, len(c.attempts))
	for _, ck := range c.keys {
		named[ck.first], named[ck.last] = true, true
		if ck.ok != 0 {
			named[ck.ok-1] = true
		}
	}
	nlive := 0
	for i, ca := range c.attempts {
		if !ca.done || named[i] {
			nlive++
		}
	}
	j := &joiner{
		attempts: make(map[string]*Attempt, nlive),
		done:     make(map[string]int, len(c.attempts)-nlive),
		keys:     make(map[string]*keyState, len(c.keys)),
		stray:    map[string]*strayRow{},
		lean:     true,
	}
	as := make([]Attempt, 0, nlive)
	kss := make([]keyState, len(c.keys))
	at := make([]*Attempt, len(c.attempts)) // by place in the list; nil when done
	for i, ca := range c.attempts {
		if ca.id == "" || j.known(ca.id) {
			return nil, errCheckpoint
		}
		if ca.done && !named[i] {
			j.done[ca.id] = ca.line
			continue
		}
		as = append(as, Attempt{Intent: Intent{AttemptID: ca.id, IdempotencyKey: ca.key}, Path: l.path, Line: ca.line})
		a := &as[len(as)-1]
		if ca.done {
			a.Outcome = elided
		}
		j.attempts[ca.id] = a
		at[i] = a
	}
	for i, ck := range c.keys {
		if ck.key == "" || ck.attempts < 1 || j.keys[ck.key] != nil {
			return nil, errCheckpoint
		}
		first, last := at[ck.first], at[ck.last]
		first.Intent.IdempotencyKey, first.Intent.InputDigest = ck.key, ck.input
		first.Intent.Provider, first.Intent.Entrypoint = ck.provider, ck.entrypoint
		ks := &kss[i]
		ks.first, ks.last, ks.attempts = first, last, ck.attempts
		if ck.ok != 0 {
			if ks.ok = at[ck.ok-1]; ks.ok.Outcome == nil || ck.okRow.n == 0 {
				return nil, errCheckpoint
			}
			ks.okRow = ck.okRow
		}
		j.keys[ck.key] = ks
	}
	for _, cs := range c.strays {
		r, err := l.readRow(cs.row, c.offset)
		if err != nil || r.outcome == nil || r.outcome.AttemptID != cs.id || j.known(cs.id) || j.stray[cs.id] != nil {
			return nil, errCheckpoint
		}
		j.stray[cs.id] = &strayRow{Located[Outcome]{Value: *r.outcome, Path: l.path, Line: cs.line, Off: cs.row.off}, cs.row.n}
		j.strays = append(j.strays, cs.id)
	}
	return j, nil
}

// readRow reads and parses the row at ref, which ends (with its newline)
// by limit. A failed read is refused ledger_write_failed, as fold's; any
// other error means the bytes there are not that row.
func (l *Ledger) readRow(ref rowRef, limit int64) (row, error) {
	if ref.off < 0 || ref.n <= 0 || ref.n > maxLine || ref.off+ref.n >= limit {
		return row{}, errCheckpoint
	}
	b := make([]byte, ref.n)
	if _, err := l.f.ReadAt(b, ref.off); err != nil && !errors.Is(err, io.EOF) {
		return row{}, refusal.Wrap(refusal.LedgerWriteFailed, err, "cannot read receipts ledger %s", l.path)
	} else if err != nil {
		return row{}, err
	}
	return parseRow(b)
}

// okAttempt is ks's first ok attempt with its outcome, read back from
// its row: the Ledger keeps no outcome in memory (elided).
func (l *Ledger) okAttempt(ks *keyState) (*Attempt, error) {
	a := ks.ok
	if a.Outcome != elided {
		return a, nil
	}
	r, err := l.readRow(ks.okRow, l.end)
	if refusal.CodeOf(err) == refusal.LedgerWriteFailed {
		return nil, err
	}
	if err != nil || r.outcome == nil || r.outcome.AttemptID != a.Intent.AttemptID || r.outcome.Status != StatusOK {
		return nil, refusal.New(refusal.LedgerCorrupt,
			"receipts ledger %s no longer holds, at byte offset %d, the ok outcome of attempt %s that it held when this process read it: it was rewritten",
			l.path, ks.okRow.off, a.Intent.AttemptID)
	}
	ok := *a
	ok.Outcome = r.outcome
	return &ok, nil
}

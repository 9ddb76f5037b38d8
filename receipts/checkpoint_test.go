package receipts

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// state is what a Ledger's decisions depend on, in a comparable form:
// every attempt (id, line, whether it has an outcome, its key while it has
// none), every key (first attempt and its request, count, last attempt,
// first ok and that ok's outcome) and the outcomes still without an intent.
func state(t *testing.T, l *Ledger) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "end %d line %d\n", l.end, l.line)
	var lines []string
	for _, a := range l.j.attempts {
		key := ""
		if a.Outcome == nil {
			key = a.Intent.IdempotencyKey
		}
		lines = append(lines, fmt.Sprintf("attempt %s %s:%d done=%v key=%q\n", a.Intent.AttemptID, a.Path, a.Line, a.Outcome != nil, key))
	}
	for id, line := range l.j.done {
		lines = append(lines, fmt.Sprintf("attempt %s %s:%d done=true key=\"\"\n", id, l.path, line))
	}
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, ""))
	keys := make([]string, 0, len(l.j.keys))
	for k := range l.j.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ks := l.j.keys[k]
		f := ks.first.Intent
		fmt.Fprintf(&b, "key %q first %s %s %s %s n=%d last %s done=%v", k, f.AttemptID, f.InputDigest, f.Provider, f.Entrypoint, ks.attempts, ks.last.Intent.AttemptID, ks.last.Outcome != nil)
		if ks.ok != nil {
			ok, err := l.okAttempt(ks)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, " ok %s %+v", ok.Intent.AttemptID, *ok.Outcome)
		}
		b.WriteString("\n")
	}
	for _, id := range l.j.strays {
		if s, ok := l.j.stray[id]; ok {
			fmt.Fprintf(&b, "stray %s %s:%d@%d+%d %+v\n", id, s.Path, s.Line, s.Off, s.n, s.Value)
		}
	}
	return b.String()
}

func openOpts(t *testing.T, path string, opts Options) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// sameAsFullRead opens path from its checkpoint and without it, and
// compares what the two Ledgers know with each other and with what the
// scan's joiner, which keeps whole receipts, knows of the same rows; it
// reports whether the first was started from a checkpoint.
func sameAsFullRead(t *testing.T, path string) bool {
	t.Helper()
	full := openOpts(t, path, Options{NoCheckpoint: true})
	ck := openOpts(t, path, Options{})
	loaded := ck.ckptAt > 0
	if a, b := state(t, full), state(t, ck); a != b {
		t.Fatalf("a Ledger opened from its checkpoint knows\n%s\nnot, as one that read the whole ledger,\n%s", b, a)
	}
	if a, b := state(t, scanned(t, path)), state(t, full); a != b {
		t.Fatalf("a Ledger (lean) knows\n%s\nnot, as the scan's joiner,\n%s", b, a)
	}
	full.Close()
	ck.Close()
	return loaded
}

// scanned folds the ledger at path (repaired: no tail) into a joiner
// that keeps whole receipts, as Scan's, in a Ledger for state.
func scanned(t *testing.T, path string) *Ledger {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	l := &Ledger{path: path, f: f, j: newJoiner()}
	lr := newLineReader(f, 0, st.Size(), 1)
	for {
		ln, err := lr.next()
		if err != nil {
			break
		}
		if cl := checkLine(l.j, path, ln); cl != nil || !ln.terminated {
			t.Fatalf("line %d: %+v", ln.no, cl)
		}
		l.end, l.line = lr.off, ln.no
	}
	return l
}

// TestCheckpointSameAsFullRead drives a ledger through every kind of row
// a Ledger folds (keyed and unkeyed attempts, ok and failed outcomes,
// replays, orphans, outcomes before their intent, torn tails and their
// repair) and, every few steps, checks that a Ledger opened from the
// checkpoint knows exactly what one that read the whole ledger knows.
func TestCheckpointSameAsFullRead(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 42))
			path := filepath.Join(t.TempDir(), "l.jsonl")
			ctx := context.Background()
			l := openOpts(t, path, Options{})
			loads := 0
			var ahead []string // outcomes appended before their intent
			for step := range 300 {
				key := ""
				if rng.IntN(3) > 0 {
					key = fmt.Sprint("k", rng.IntN(12))
				}
				id := fmt.Sprintf("s%d-%d", seed, step)
				switch r := rng.IntN(20); {
				case r == 0: // an outcome whose intent comes later, or never
					ahead = append(ahead, "x"+id)
					out, _ := encodeOutcome(testOutcome("x"+id, []string{StatusOK, StatusError}[rng.IntN(2)]))
					appendFile(t, path, string(out))
				case r == 1 && len(ahead) > 0: // the intent of one of those
					k := rng.IntN(len(ahead))
					in, _ := encodeIntent(testIntent(ahead[k], key, "in0"))
					ahead = slices.Delete(ahead, k, k+1)
					appendFile(t, path, string(in))
				case r == 2: // a torn tail, repaired by the next Open
					l.Close()
					appendFile(t, path, `{"format":"cruxprov.receipt/v1.1","phase":"int`)
					l = openOpts(t, path, Options{})
				case r == 3: // an orphan: the writer goes away mid-attempt
					if _, err := l.Begin(ctx, testIntent(id, key, fmt.Sprint("in", rng.IntN(2)))); err != nil && !errors.Is(err, refusal.IdempotencyConflict) {
						t.Fatal(err)
					}
					l.Close()
					l = openOpts(t, path, Options{})
				default:
					d, err := l.Begin(ctx, testIntent(id, key, fmt.Sprint("in", rng.IntN(2))))
					if errors.Is(err, refusal.IdempotencyConflict) {
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if d.Replay != nil {
						continue
					}
					status := []string{StatusOK, StatusError, StatusTimeout}[rng.IntN(3)]
					if err := l.Finish(ctx, testOutcome(d.AttemptID, status)); err != nil {
						t.Fatal(err)
					}
				}
				if step%25 == 24 {
					if sameAsFullRead(t, path) {
						loads++
					}
				}
			}
			l.Close()
			if sameAsFullRead(t, path) {
				loads++
			}
			if loads == 0 {
				t.Fatal("no Ledger was opened from a checkpoint")
			}
		})
	}
}

// TestKillWhileCheckpointing SIGKILLs, at random moments, a writer that
// opens the ledger (writing a checkpoint each time), appends and closes
// in a loop: whatever a kill leaves (a checkpoint half written, renamed
// or not, a row without its outcome), a Ledger opened from what is on
// disk knows what one that reads the whole ledger knows.
func TestKillWhileCheckpointing(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 8
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	path := filepath.Join(t.TempDir(), "l.jsonl")
	loads := 0
	for range n {
		cmd := started(t, "open-loop", path, "looping\n")
		time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the writer ended before it was killed: %v", err)
		}
		if sameAsFullRead(t, path) {
			loads++
		}
	}
	if loads == 0 {
		t.Fatal("no Ledger was opened from a checkpoint")
	}
}

// fillLedger writes n receipts under their own keys and returns the
// ledger's path, with a checkpoint of all of it beside.
func fillLedger(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l := openOpts(t, path, Options{})
	for i := range n {
		d := begin(t, l, testIntent(fmt.Sprint("a", i), fmt.Sprint("k", i), "in"))
		finish(t, l, testOutcome(d.AttemptID, StatusOK))
	}
	l.Close()
	if l := openOpts(t, path, Options{}); l.ckptAt != l.end {
		t.Fatalf("checkpoint at %d, ledger read to %d", l.ckptAt, l.end)
	}
	return path
}

// A byte changed under the checkpoint is found as without one: the
// prefix's hash differs, the whole ledger is read, and the bad line is
// refused with its line and offset.
func TestCheckpointCoversItsBytes(t *testing.T) {
	path := fillLedger(t, 20)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"acme-echo"`)
	b[i+1] = 'X' // a provider renamed: still a valid row, but not the one checkpointed
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	full := openOpts(t, path, Options{NoCheckpoint: true})
	ck := openOpts(t, path, Options{})
	if ck.ckptAt != ck.end {
		// Read whole: a new checkpoint is written of the changed file.
		t.Fatalf("checkpoint at %d after the full read to %d", ck.ckptAt, ck.end)
	}
	if a, b := state(t, full), state(t, ck); a != b {
		t.Fatalf("from a stale checkpoint:\n%s\nread whole:\n%s", b, a)
	}

	// A byte that makes a bad line: the same refusal, word for word.
	i = strings.Index(string(b), `"phase"`)
	b[i] = '{'
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, ferr := Open(context.Background(), path, Options{NoCheckpoint: true})
	_, cerr := Open(context.Background(), path, Options{})
	var ce *CorruptError
	if !errors.As(cerr, &ce) || ferr == nil || cerr.Error() != ferr.Error() {
		t.Fatalf("with a checkpoint: %v\nwithout: %v", cerr, ferr)
	}
}

// A checkpoint that is damaged, cut short, of another ledger or of a
// ledger since rotated is not used, and the next Open writes a good one.
func TestCheckpointNotUsed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path, ck string)
	}{
		{"flipped byte", func(t *testing.T, path, ck string) {
			b, _ := os.ReadFile(ck)
			b[len(b)/2] ^= 1
			os.WriteFile(ck, b, 0o600)
		}},
		{"cut short", func(t *testing.T, path, ck string) { os.Truncate(ck, 100) }},
		{"empty", func(t *testing.T, path, ck string) { os.WriteFile(ck, nil, 0o600) }},
		{"a directory", func(t *testing.T, path, ck string) { os.Remove(ck); os.Mkdir(ck, 0o700) }},
		{"a FIFO no one writes", func(t *testing.T, path, ck string) {
			// Read without blocking and refused (else Open would hang).
			os.Remove(ck)
			if err := syscall.Mkfifo(ck, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"rotated", func(t *testing.T, path, ck string) {
			// The ledger renamed aside and a new one begun, shorter.
			os.Rename(path, path+".1")
			appendFile(t, path, "")
			l := openOpts(t, path, Options{NoCheckpoint: true})
			d := begin(t, l, testIntent("new", "k0", "other"))
			finish(t, l, testOutcome(d.AttemptID, StatusError))
		}},
		{"same length, other bytes", func(t *testing.T, path, ck string) {
			b, _ := os.ReadFile(path)
			b = []byte(strings.ReplaceAll(string(b), `"k1"`, `"k2"`))
			os.WriteFile(path, b, 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fillLedger(t, 30)
			ck := path + ".checkpoint"
			tc.damage(t, path, ck)
			full := openOpts(t, path, Options{NoCheckpoint: true})
			l, err := Open(context.Background(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if a, b := state(t, full), state(t, l); a != b {
				t.Fatalf("with the %s checkpoint:\n%s\nread whole:\n%s", tc.name, b, a)
			}
			if tc.name == "a directory" {
				return // nothing can be written over it; the ledger is read whole each time
			}
			if l.ckptAt != l.end {
				t.Fatalf("no new checkpoint: at %d, ledger read to %d", l.ckptAt, l.end)
			}
			if again := openOpts(t, path, Options{}); again.ckptAt != again.end {
				t.Fatal("the rewritten checkpoint was not used")
			}
		})
	}
}

// NoCheckpoint neither reads nor writes one.
func TestNoCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l := openOpts(t, path, Options{NoCheckpoint: true})
	d := begin(t, l, testIntent("", "k", "in"))
	finish(t, l, testOutcome(d.AttemptID, StatusOK))
	l.Close()
	openOpts(t, path, Options{NoCheckpoint: true}).Close()
	if _, err := os.Lstat(path + ".checkpoint"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a checkpoint was written: %v", err)
	}
}

// A replay reads the ok outcome the checkpoint points at; one rewritten
// after the Ledger was opened is refused, not replayed.
func TestCheckpointReplay(t *testing.T) {
	path := fillLedger(t, 5)
	l := openOpts(t, path, Options{})
	if l.ckptAt == 0 {
		t.Fatal("not opened from a checkpoint")
	}
	d := begin(t, l, testIntent("", "k3", "in"))
	if d.Replay == nil || d.Replay.ReplayOf != "a3" || d.Replay.ResultDigest != dg("result") {
		t.Fatalf("replay %+v", d.Replay)
	}
	ks := l.j.keys["k1"]
	b, _ := os.ReadFile(path)
	row := b[ks.okRow.off : ks.okRow.off+ks.okRow.n]
	bad := strings.Replace(string(row), `"a1"`, `"b1"`, 1)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(bad), ks.okRow.off)
	f.Close()
	if _, err := l.Begin(context.Background(), testIntent("", "k1", "in")); !errors.Is(err, refusal.LedgerCorrupt) {
		t.Fatalf("replay of a rewritten outcome: %v", err)
	}
}

// FuzzCheckpoint feeds the decoder any bytes behind the magic, with a
// good trailing sha256 so that the fields are read: it must not panic nor
// allocate beyond what the bytes can hold, and whatever it accepts must
// build a joiner or be refused, not crash.
func FuzzCheckpoint(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "l.jsonl")
	l, err := Open(context.Background(), path, Options{})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		d, _ := l.Begin(context.Background(), testIntent("", fmt.Sprint("k", i%2), "in"))
		l.Finish(context.Background(), testOutcome(d.AttemptID, []string{StatusOK, StatusError}[i%2]))
	}
	l.Begin(context.Background(), testIntent("orphan", "k9", "in"))
	good := l.encodeCheckpoint()
	f.Add(good[len(checkpointMagic) : len(good)-sha256.Size])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte(checkpointMagic), body...)
		sum := sha256.Sum256(b)
		c, err := decodeCheckpoint(append(b, sum[:]...))
		if err != nil {
			return
		}
		probe := &Ledger{path: path, f: l.f}
		if j, err := c.joiner(probe); err == nil && len(j.attempts)+len(j.done) != len(c.attempts) {
			t.Fatalf("%d attempts joined of %d", len(j.attempts)+len(j.done), len(c.attempts))
		}
	})
}

// A Ledger keeps a finished attempt that no key names by its id and line
// only; it is as strict about it as about any other: a second intent or
// outcome for it in the ledger is refused ledger_corrupt (read whole,
// from a checkpoint, or appended by another writer while it is open), and
// Begin and Finish refuse to write one.
func TestRetiredAttemptsStayStrict(t *testing.T) {
	ctx := context.Background()
	for _, second := range []string{"intent", "outcome"} {
		t.Run(second, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			l := openOpts(t, path, Options{})
			d := begin(t, l, testIntent("done-1", "", "in"))
			finish(t, l, testOutcome(d.AttemptID, StatusError))
			l.Close()
			l = openOpts(t, path, Options{}) // which writes a checkpoint of it
			if _, retired := l.j.done["done-1"]; !retired {
				t.Fatal("a finished unkeyed attempt is still kept whole")
			}
			if _, err := l.Begin(ctx, testIntent("done-1", "", "in")); err == nil || !strings.Contains(err.Error(), "attempt done-1 is already in") {
				t.Fatalf("Begin of a finished attempt's id: %v", err)
			}
			if err := l.Finish(ctx, testOutcome("done-1", StatusOK)); err == nil || !strings.Contains(err.Error(), "already has an outcome") {
				t.Fatalf("Finish of a finished attempt: %v", err)
			}
			row, _ := encodeOutcome(testOutcome("done-1", StatusOK))
			want := "a second outcome for attempt done-1"
			if second == "intent" {
				row, _ = encodeIntent(testIntent("done-1", "", "in"))
				want = "a second intent for attempt done-1 (the first: " + path + " line 1)"
			}
			appendFile(t, path, string(row))
			// Another writer's row, read by the open Ledger's next call.
			if _, err := l.Begin(ctx, testIntent("", "", "in")); !errors.Is(err, refusal.LedgerCorrupt) || !strings.Contains(err.Error(), want) {
				t.Fatalf("a Ledger open when a second %s was appended: %v", second, err)
			}
			l.Close()
			for _, opts := range []Options{{NoCheckpoint: true}, {}} {
				if _, err := Open(ctx, path, opts); !errors.Is(err, refusal.LedgerCorrupt) || !strings.Contains(err.Error(), want) {
					t.Fatalf("Open %+v: %v", opts, err)
				}
			}
			if _, err := os.Stat(path + ".checkpoint"); err != nil {
				t.Fatalf("the Open from a checkpoint had none: %v", err)
			}
		})
	}
}

// A replay whose ok outcome row cannot be read (here the kernel's EISDIR:
// the descriptor is a directory's) is refused ledger_write_failed, as a
// failed read of the ledger is; only bytes that are not the row are
// ledger_corrupt (TestCheckpointReplay).
func TestReplayReadFailure(t *testing.T) {
	d, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := &Attempt{Intent: Intent{AttemptID: "a1"}, Outcome: elided}
	l := &Ledger{path: "l.jsonl", f: d, end: 4096}
	_, err = l.okAttempt(&keyState{first: a, last: a, ok: a, okRow: rowRef{100, 200}, attempts: 1})
	if refusal.CodeOf(err) != refusal.LedgerWriteFailed || !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("a replay whose row cannot be read: %v", err)
	}
}

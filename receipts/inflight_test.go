package receipts

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/refusal"
)

// keyChild is the child side of the key lock tests.
//   - begin-key-and-hang: begins attempt "held-1" under key "k", says
//     "begun" and waits to be killed;
//   - same-key: waits for the parent's go, begins under key "k" and, when
//     the decision is to run, runs for a while and records ok; it says
//     "ran", "replayed" or "conflict".
func keyChild(ctx context.Context, role, path, name string) error {
	if role == "same-key" {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
	}
	l, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	if role == "begin-key-and-hang" {
		if _, err := l.Begin(ctx, testIntent("held-1", "k", "in")); err != nil {
			return err
		}
		fmt.Println("begun")
		select {}
	}
	d, err := l.Begin(ctx, testIntent(name, "k", "in"))
	switch {
	case errors.Is(err, refusal.IdempotencyConflict):
		fmt.Println("conflict")
		return l.Close()
	case err != nil:
		return err
	case d.Replay != nil:
		fmt.Println("replayed")
		return l.Close()
	}
	time.Sleep(200 * time.Millisecond) // the provider runs
	if err := l.Finish(ctx, testOutcome(d.AttemptID, StatusOK)); err != nil {
		return err
	}
	fmt.Println("ran")
	return l.Close()
}

// TestRunningAttemptOfAnotherProcessConflicts: an attempt that another
// live process began under a key is running, not an orphan: Begin with
// the key is refused idempotency_conflict and writes nothing. Once that
// process is SIGKILLed its intent is an orphan and the key runs again as
// a new attempt, whose lock in turn keeps the key from running twice.
func TestRunningAttemptOfAnotherProcessConflicts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	cmd := started(t, "begin-key-and-hang", path, "begun\n")
	before, _ := os.ReadFile(path)
	l := openT(t, path)
	_, err := l.Begin(context.Background(), testIntent("", "k", "in"))
	if !errors.Is(err, refusal.IdempotencyConflict) || !strings.Contains(err.Error(), "attempt held-1 is still running") || !strings.HasSuffix(err.Error(), "; send the request again once it has ended") {
		t.Fatalf("while the child runs held-1: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused Begin wrote to the ledger")
	}
	// Another key, and no key, are not held up.
	finish(t, l, testOutcome(begin(t, l, testIntent("", "k2", "other")).AttemptID, StatusOK))
	finish(t, l, testOutcome(begin(t, l, testIntent("", "", "in")).AttemptID, StatusOK))

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", cmd.ProcessState)
	}
	d := begin(t, l, testIntent("", "k", "in"))
	if d.Attempt != 2 || d.Replay != nil {
		t.Fatalf("after the child died: %+v", d)
	}
	res := scanT(t, path)
	if len(res.Orphans) != 2 || res.Orphans[0].Intent.AttemptID != "held-1" || res.Orphans[1].Intent.AttemptID != d.AttemptID {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	// The new attempt holds the key: a second Ledger on the path (in this
	// very process) is refused too, until the attempt finishes.
	l2 := openT(t, path)
	if _, err := l2.Begin(context.Background(), testIntent("", "k", "in")); !errors.Is(err, refusal.IdempotencyConflict) ||
		!strings.Contains(err.Error(), "attempt "+d.AttemptID+" is still running") || !strings.HasSuffix(err.Error(), "; send the request again once it has ended") {
		t.Fatalf("second Ledger while the attempt runs: %v", err)
	}
	finish(t, l, testOutcome(d.AttemptID, StatusError))
	d2 := begin(t, l2, testIntent("", "k", "in"))
	if d2.Attempt != 3 || d2.Replay != nil {
		t.Fatalf("after the error: %+v", d2)
	}
	// Closing a Ledger releases its keys: the attempt is an orphan.
	l2.Close()
	if d3 := begin(t, l, testIntent("", "k", "in")); d3.Attempt != 4 || d3.Replay != nil {
		t.Fatalf("after Close: %+v", d3)
	}
	if st, err := os.Stat(path + ".inflight"); err != nil || st.Mode() != 0o600 || st.Size() != 0 {
		t.Fatalf("sidecar: %v %v", st, err)
	}
}

// TestSameKeyRunsOnce: processes that begin the same request under one
// key at the same moment (the CLI opens one Ledger per process) run it
// once; each other one either is refused while it runs or replays it.
func TestSameKeyRunsOnce(t *testing.T) {
	n := 8
	path := filepath.Join(t.TempDir(), "l.jsonl")
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	errs := make([]bytes.Buffer, n)
	gos := make([]io.WriteCloser, n)
	for i := range cmds {
		c := child(t, "same-key", path, fmt.Sprintf("c%d", i))
		c.Stdout, c.Stderr = &outs[i], &errs[i]
		w, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i], gos[i] = c, w
	}
	var wg sync.WaitGroup
	for i := range gos {
		wg.Go(func() { io.WriteString(gos[i], "go\n"); gos[i].Close() })
	}
	wg.Wait()
	said := map[string]int{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v: %s", i, err, errs[i].String())
		}
		said[strings.TrimSpace(outs[i].String())]++
	}
	if said["ran"] != 1 || said["ran"]+said["replayed"]+said["conflict"] != n {
		t.Fatalf("children said %v", said)
	}
	res := scanT(t, path)
	ran := 0
	for _, a := range res.Attempts {
		if a.Outcome != nil && a.Outcome.Status == StatusOK && !a.Outcome.Replayed {
			ran++
		}
	}
	if ran != 1 || len(res.Orphans) != 0 || len(res.Attempts) != 1+said["replayed"] {
		t.Fatalf("%d runs recorded, %d orphans, %d attempts", ran, len(res.Orphans), len(res.Attempts))
	}
}

// A ledger reached through a symbolic link (the link named in one
// executor's configuration, the target in another's, or a linked
// directory) has one set of sidecars: the key locks, the repair lock and
// journal are found beside the file itself, so a key held through one
// path is held through the other, and nothing is written beside a link.
func TestLedgerThroughALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "l.jsonl")
	if err := os.Mkdir(filepath.Dir(real), 0o700); err != nil {
		t.Fatal(err)
	}
	fileLink := filepath.Join(dir, "link.jsonl")
	dirLink := filepath.Join(dir, "alias")
	l := openT(t, real)
	if err := os.Symlink(real, fileLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", dirLink); err != nil {
		t.Fatal(err)
	}
	d := begin(t, l, testIntent("", "k", "in"))
	for _, p := range []string{fileLink, filepath.Join(dirLink, "l.jsonl")} {
		l2 := openT(t, p)
		if _, err := l2.Begin(context.Background(), testIntent("", "k", "in")); !errors.Is(err, refusal.IdempotencyConflict) {
			t.Errorf("Begin through %s while the attempt runs through the target: %v", p, err)
		}
		if l2.Path() != p {
			t.Errorf("Path() = %s, want the path given, %s", l2.Path(), p)
		}
		l2.Close()
	}
	finish(t, l, testOutcome(d.AttemptID, StatusOK))
	if side, _ := filepath.Glob(fileLink + ".*"); len(side) != 0 {
		t.Errorf("sidecars beside the link: %v", side)
	}
}

// TestLedgerMovedAsideWhileOpen: a ledger moved aside (as docs/receipts.md
// advises for a corrupt one) or replaced while a process has it open gets
// nothing more from that process, which is told to open it again; before,
// it went on appending rows to the moved file, which nobody reads, and
// its repair journal was the new file's.
func TestLedgerMovedAsideWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l := openT(t, path)
	finish(t, l, testOutcome(begin(t, l, testIntent("", "", "in")).AttemptID, StatusOK))
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path + ".old")
	if _, err := l.Begin(context.Background(), testIntent("", "", "in")); !errors.Is(err, refusal.LedgerWriteFailed) || !strings.Contains(err.Error(), "moved or replaced") ||
		!errors.As(err, new(*MovedError)) || err.Error() != "ledger_write_failed: "+(&MovedError{Path: path}).Error() {
		t.Fatalf("Begin after the ledger was moved aside: %v", err)
	}
	if after, _ := os.ReadFile(path + ".old"); !bytes.Equal(before, after) {
		t.Error("a row was written to the ledger moved aside")
	}
	// A new ledger at the path is another file: the old Ledger stays out.
	l2 := openT(t, path)
	finish(t, l2, testOutcome(begin(t, l2, testIntent("", "", "in")).AttemptID, StatusOK))
	if _, err := l.Begin(context.Background(), testIntent("", "", "in")); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("Begin of the old Ledger beside a new file: %v", err)
	}
}

// TestWritableJudgesTheKeyLocks: Writable, receipts scan's question,
// answers for the key locks as a keyed Begin finds them. A key-lock file
// a run cannot open for writing (a directory here, for root too; one left
// 0400 by another user alike) refuses every keyed run, so Writable refuses
// it; a ledger without one is writable, and one that is a regular file.
func TestWritableJudgesTheKeyLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := Writable(path); err != nil {
		t.Fatalf("no key locks yet: %v", err)
	}
	if err := os.Mkdir(path+".inflight", 0o700); err != nil {
		t.Fatal(err)
	}
	werr := Writable(path)
	_, berr := l.Begin(context.Background(), testIntent("att_k", "k", "in"))
	if refusal.CodeOf(werr) != refusal.LedgerWriteFailed || refusal.CodeOf(berr) != refusal.LedgerWriteFailed {
		t.Fatalf("a directory for the key locks: Writable %v, keyed Begin %v", werr, berr)
	}
	if !strings.Contains(werr.Error(), "in-flight lock file "+path+".inflight") {
		t.Errorf("Writable does not name the key locks: %v", werr)
	}
	os.Remove(path + ".inflight")
	if _, err := l.Begin(context.Background(), testIntent("att_k2", "k", "in")); err != nil {
		t.Fatal(err)
	}
	if err := Writable(path); err != nil {
		t.Errorf("key locks a run made: %v", err)
	}
}

// TestWritableOfALedgerNotMadeYet: a ledger no run has made yet is judged
// as a run's Open judges it (CreateAtBegin: its nearest existing
// directory must take new entries). Writable said nil for any missing
// ledger, so receipts scan, a new executor's health check, exited 0 with
// a state directory it could not write (0555, seen as cruxprov-rootless)
// while every run was refused ledger_write_failed. (As root, run as uid
// 65534: root ignores the mode.)
func TestWritableOfALedgerNotMadeYet(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "be a user the directory's mode stops")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-writable-"), "TestWritableOfALedgerNotMadeYet")
		return
	}
	dir := t.TempDir()
	if err := Writable(filepath.Join(dir, "state", "receipts", "l.jsonl")); err != nil {
		t.Errorf("a ledger a run can make: %v", err)
	}
	state := filepath.Join(dir, "ro")
	if err := os.Mkdir(state, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(state, 0o755) })
	path := filepath.Join(state, "receipts", "l.jsonl")
	werr := Writable(path)
	_, oerr := Open(context.Background(), path, Options{CreateAtBegin: true})
	if refusal.CodeOf(werr) != refusal.LedgerWriteFailed || refusal.CodeOf(oerr) != refusal.LedgerWriteFailed {
		t.Fatalf("a ledger no run can make: Writable %v, Open %v", werr, oerr)
	}
	if werr.Error() != oerr.Error() {
		t.Errorf("Writable says %q, a run's Open %q", werr, oerr)
	}
}

// TestWritableJudgesTheRepairLock: a ledger whose last line has no
// newline (a torn row, or a whole one a writer died before terminating)
// is repaired by its next writer first, under the repair lock it creates
// beside the ledger, so a directory that takes no new entries (0555, the
// ledger file itself still this user's to write) refuses every run.
// Writable, receipts scan's question, said nil there: the scan of the
// executor's own ledger exited 0, "the next writer quarantines it", while
// every run was refused "cannot take the repair lock". A sound ledger in
// that directory is writable (no repair is due). (As root, run as uid
// 65534: root ignores the mode.)
func TestWritableJudgesTheRepairLock(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "be a user the directory's mode stops")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-writable-"), "TestWritableJudgesTheRepairLock")
		return
	}
	for name, tail := range map[string]func(row []byte) []byte{
		"torn":                            func(row []byte) []byte { return row[:len(row)/2] },
		"a whole row without its newline": func(row []byte) []byte { return bytes.TrimSuffix(row, []byte("\n")) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "receipts")
			path := filepath.Join(dir, "l.jsonl")
			l := openT(t, path)
			// Keyed: its key locks are made, which a keyed run of a
			// directory of mode 0555 needs (TestWritableJudgesTheKeyLocks).
			finish(t, l, testOutcome(begin(t, l, testIntent("att_1", "k", "in")).AttemptID, StatusOK))
			l.Close()
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
			if err := Writable(path); err != nil {
				t.Fatalf("a sound ledger in a directory of mode 0555: %v", err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			row := b[bytes.IndexByte(b, '\n')+1:] // the outcome's row
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail(row)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			werr := Writable(path)
			_, oerr := Open(context.Background(), path, Options{CreateAtBegin: true})
			if refusal.CodeOf(werr) != refusal.LedgerWriteFailed || refusal.CodeOf(oerr) != refusal.LedgerWriteFailed {
				t.Fatalf("a tail to repair in a directory of mode 0555: Writable %v, a run's Open %v", werr, oerr)
			}
			if werr.Error() != oerr.Error() {
				t.Errorf("Writable says %q, a run's Open %q", werr, oerr)
			}
			os.Chmod(dir, 0o755)
			if err := Writable(path); err != nil {
				t.Errorf("a tail to repair in a writable directory: %v", err)
			}
		})
	}
}

// TestKeyLocksNotMadeSayWhatStopsThem: the first keyed run of a ledger
// whose directory takes no new entries (0555: the ledger file itself is
// this user's to write) cannot make its key locks <path>.inflight, and
// was told to "make it writable by this user (chmod u+w, or chown it to
// this user)", of a file that did not exist (found walking receipts.md as
// cruxprov-rootless). It names the directory, which is what stops it.
// (As root, run as uid 65534: root ignores the mode.)
func TestKeyLocksNotMadeSayWhatStopsThem(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "be a user the directory's mode stops")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-inflight-"), "TestKeyLocksNotMadeSayWhatStopsThem")
		return
	}
	dir := filepath.Join(t.TempDir(), "receipts")
	path := filepath.Join(dir, "l.jsonl")
	l := openT(t, path)
	defer l.Close()
	finish(t, l, testOutcome(begin(t, l, testIntent("att_1", "", "in")).AttemptID, StatusOK))
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	_, err := l.Begin(context.Background(), testIntent("att_k", "k", "in"))
	if refusal.CodeOf(err) != refusal.LedgerWriteFailed {
		t.Fatalf("a keyed Begin whose key locks cannot be made: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "make the directory "+dir+" writable by this user") || strings.Contains(msg, "chmod u+w") {
		t.Errorf("the refusal does not say to make the directory writable: %s", msg)
	}
	if _, err := os.Lstat(path + ".inflight"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key locks: %v", err)
	}
}

// TestWritableJudgesKeyLocksNotMadeYet: a ledger this user may write, in a
// directory it may not (0555), without key locks yet: every keyed run is
// refused, since its first Begin cannot create <path>.inflight there, and
// Writable (receipts scan's health check) refuses it in the writer's words;
// it said nil, while it refused key locks that existed unwritable. Runs
// without a key still go. Once the key locks are there (made while the
// directory took them) it is writable.
func TestWritableJudgesKeyLocksNotMadeYet(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "be a user the directory's mode stops")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-writable-"), "TestWritableJudgesKeyLocksNotMadeYet")
		return
	}
	dir := filepath.Join(t.TempDir(), "receipts")
	path := filepath.Join(dir, "l.jsonl")
	l := openT(t, path)
	finish(t, l, testOutcome(begin(t, l, testIntent("att_1", "", "in")).AttemptID, StatusOK))
	l.Close()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	werr := Writable(path)
	l, err := Open(context.Background(), path, Options{CreateAtBegin: true})
	if err != nil {
		t.Fatal(err)
	}
	_, berr := l.Begin(context.Background(), testIntent("att_2", "k", "in"))
	if refusal.CodeOf(berr) != refusal.LedgerWriteFailed || refusal.CodeOf(werr) != refusal.LedgerWriteFailed {
		t.Fatalf("no key locks, in a directory of mode 0555: Writable %v, a keyed Begin %v", werr, berr)
	}
	if werr.Error() != berr.Error() || !strings.Contains(werr.Error(), "make the directory "+dir+" writable") {
		t.Errorf("Writable says %q, a keyed Begin %q", werr, berr)
	}
	finish(t, l, testOutcome(begin(t, l, testIntent("att_3", "", "in")).AttemptID, StatusOK)) // without a key: goes
	l.Close()
	os.Chmod(dir, 0o755)
	l = openT(t, path)
	finish(t, l, testOutcome(begin(t, l, testIntent("att_4", "k", "in")).AttemptID, StatusOK)) // makes the key locks
	l.Close()
	os.Chmod(dir, 0o555)
	if err := Writable(path); err != nil {
		t.Fatalf("key locks made, in a directory of mode 0555: %v", err)
	}
}

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
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the writer processes of the crash tests: with
// childEnv set, TestMain runs that role instead of the tests.
const (
	childEnv  = "RECEIPTS_TEST_CHILD"
	ledgerEnv = "RECEIPTS_TEST_LEDGER"
	nameEnv   = "RECEIPTS_TEST_NAME"
)

func TestMain(m *testing.M) {
	// Every Open that reads a row writes a checkpoint, so that every test
	// (and every child) also runs the ledger from checkpoints.
	checkpointMin, checkpointShare = 1, 1<<40
	role := os.Getenv(childEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	err := runChild(role, os.Getenv(ledgerEnv), os.Getenv(nameEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(role, path, name string) error {
	ctx := context.Background()
	switch role {
	case "begin-and-hang":
		l, err := Open(ctx, path, Options{})
		if err != nil {
			return err
		}
		if _, err := l.Begin(ctx, testIntent("crash-1", "k", "in")); err != nil {
			return err
		}
		fmt.Println("begun")
		select {} // killed here, between intent and outcome
	case "writer":
		// Wait for the parent's go, so that both writers start together.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		l, err := Open(ctx, path, Options{})
		if err != nil {
			return err
		}
		for i := range 2 {
			id := fmt.Sprintf("%s-%d", name, i)
			if _, err := l.Begin(ctx, testIntent(id, "", "in")); err != nil {
				return err
			}
			fmt.Println("intent", id)
			if err := l.Finish(ctx, testOutcome(id, StatusOK)); err != nil {
				return err
			}
			fmt.Println("outcome", id)
		}
		return l.Close()
	case "nobody":
		return nobodyChild(ctx, path)
	case "repair-lock-and-hang":
		// Killed holding the repair lock, as a writer that dies mid-repair.
		l, err := Open(ctx, path, Options{})
		if err != nil {
			return err
		}
		return l.locked(ctx, func() error {
			return l.withRepairLock(ctx, func() error {
				fmt.Println("locked")
				select {}
			})
		})
	case "begin-finish-one-thread":
		// One OS thread for every syscall, so that strace's per-thread
		// count of fdatasync is the ledger's: the intent's, then the
		// outcome's.
		runtime.LockOSThread()
		l, err := Open(ctx, path, Options{})
		if err != nil {
			return err
		}
		if _, err := l.Begin(ctx, testIntent("sync-1", "k", "in")); err != nil {
			return err
		}
		if err := l.Finish(ctx, testOutcome("sync-1", StatusOK)); err != nil {
			return err
		}
		return l.Close()
	case "begin-key-and-hang", "same-key":
		return keyChild(ctx, role, path, name)
	case "open-loop":
		// Opens (writing a checkpoint each time: TestMain), begins and
		// finishes under a few keys, closes, again, until killed; its
		// attempt ids are its own (a random name).
		fmt.Println("looping")
		name = newAttemptID()[4:12]
		for i := 0; ; i++ {
			l, err := Open(ctx, path, Options{})
			if err != nil {
				return err
			}
			for k := range 3 {
				d, err := l.Begin(ctx, testIntent(fmt.Sprintf("%s-%d-%d", name, i, k), fmt.Sprint("k", (i+k)%7), "in"))
				if err != nil {
					return err
				}
				if d.Replay == nil {
					if err := l.Finish(ctx, testOutcome(d.AttemptID, []string{StatusOK, StatusError}[(i+k)%2])); err != nil {
						return err
					}
				}
			}
			l.Close()
		}
	}
	return fmt.Errorf("unknown role %q", role)
}

func child(t *testing.T, role, path, name string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	// A race-enabled child sleeps a second before exiting unless told not to.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", childEnv+"="+role, ledgerEnv+"="+path, nameEnv+"="+name)
	return cmd
}

// started starts the child of mode on path and waits for its line want
// ("begun\n", "locked\n"); the child is killed when the test ends, if
// the test has not killed it before.
func started(t *testing.T, mode, path, want string) *exec.Cmd {
	t.Helper()
	cmd := child(t, mode, path, "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != want {
		t.Fatalf("child said %q (%v): %s", line, err, stderr.String())
	}
	return cmd
}

// TestKillBetweenIntentAndOutcome SIGKILLs a writer process after its
// intent was synced and finds the orphan, whole, in the scan; the next
// writer runs the key again as a new attempt.
func TestKillBetweenIntentAndOutcome(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	cmd := started(t, "begin-and-hang", path, "begun\n")
	cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	res := scanT(t, path)
	if len(res.Orphans) != 1 {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	o := res.Orphans[0]
	if !reflect.DeepEqual(o.Intent, testIntent("crash-1", "k", "in")) || o.Path != path || o.Line != 1 {
		t.Fatalf("orphan %+v", o)
	}
	l := openT(t, path)
	d := begin(t, l, testIntent("", "k", "in"))
	if d.Attempt != 2 || d.Replay != nil {
		t.Fatalf("after the orphan: %+v", d)
	}
}

// TestTwoWritersOnTornLedger: 100 times, a ledger with a torn tail (a
// fragment, or a complete record without its newline) and two writer
// processes that open and append at once. No confirmed row is lost, the
// fragment is quarantined exactly once, and the strict scan is clean.
func TestTwoWritersOnTornLedger(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 10
	}
	complete := strings.TrimSuffix(rows(t, "tail"), "\n")
	frags := []string{complete[:len(complete)/3], complete, "\x00\x00\xff"}
	start := time.Now()
	for i := range n {
		frag := frags[i%len(frags)]
		quarantined := frag != complete
		path := filepath.Join(t.TempDir(), "l.jsonl")
		prefix := rows(t, "p")
		if err := os.WriteFile(path, []byte(prefix+frag), 0o600); err != nil {
			t.Fatal(err)
		}
		cmds := []*exec.Cmd{child(t, "writer", path, "A"), child(t, "writer", path, "B")}
		outs := make([]bytes.Buffer, 2)
		errs := make([]bytes.Buffer, 2)
		var gos []io.WriteCloser
		for k, c := range cmds {
			c.Stdout, c.Stderr = &outs[k], &errs[k]
			w, err := c.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			gos = append(gos, w)
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for k := range cmds {
			wg.Add(1)
			go func() { defer wg.Done(); io.WriteString(gos[k], "go\n"); gos[k].Close() }()
		}
		wg.Wait()
		for k, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("iteration %d: writer %d: %v: %s", i, k, err, errs[k].String())
			}
		}
		res, err := Scan(context.Background(), []string{path}, ScanOptions{})
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		intents, outcomes := map[string]bool{}, map[string]bool{}
		for _, a := range res.Attempts {
			intents[a.Intent.AttemptID] = true
			if a.Outcome != nil {
				outcomes[a.Intent.AttemptID] = true
			}
		}
		for k := range outs {
			confirmed := strings.Fields(outs[k].String())
			if len(confirmed) != 8 {
				t.Fatalf("iteration %d: writer %d confirmed %q", i, k, confirmed)
			}
			for c := 0; c+1 < len(confirmed); c += 2 {
				phase, id := confirmed[c], confirmed[c+1]
				if (phase == "intent" && !intents[id]) || (phase == "outcome" && !outcomes[id]) {
					t.Fatalf("iteration %d: confirmed %s %s lost", i, phase, id)
				}
			}
		}
		wantTorn, wantAttempts := 0, 6 // p, tail, A-0, A-1, B-0, B-1
		if quarantined {
			wantTorn, wantAttempts = 1, 5
		}
		if len(res.Torn) != wantTorn || len(res.Attempts) != wantAttempts || len(res.Tails) != 0 || len(res.Orphans) != wantAttempts-4 {
			t.Fatalf("iteration %d (%q): %d torn, %d attempts, %d tails, %d orphans", i, frag, len(res.Torn), len(res.Attempts), len(res.Tails), len(res.Orphans))
		}
		if quarantined && (string(res.Torn[0].Bytes) != frag || res.Torn[0].Offset != int64(len(prefix))) {
			t.Fatalf("iteration %d: torn %+v", i, res.Torn[0])
		}
		for _, p := range []string{".lock", ".repair", ".repair.tmp"} {
			if _, err := os.Stat(path + p); err == nil {
				t.Fatalf("iteration %d: %s left behind", i, p)
			}
		}
	}
	t.Logf("%d iterations in %v", n, time.Since(start).Round(time.Millisecond))
}

// TestRepairLockOfDeadWriter: a writer SIGKILLed while it holds the repair
// lock leaves the lock file behind, fresh; the next writer that must
// repair takes it over at once instead of waiting out a TTL, while the
// dying writer's ledger flock kept it out as long as that one lived.
func TestRepairLockOfDeadWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	os.WriteFile(path, []byte(rows(t, "a")), 0o600)
	cmd := started(t, "repair-lock-and-hang", path, "locked\n")
	appendFile(t, path, "{frag")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while the repairer lives: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Fatalf("the dead writer left no lock: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	l, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("after the repairer died: %v", err)
	}
	l.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the dead writer's lock cost %v", d)
	}
	if res := scanT(t, path); len(res.Torn) != 1 || string(res.Torn[0].Bytes) != "{frag" {
		t.Fatalf("torn %+v", res.Torn)
	}
	if _, err := os.Stat(path + ".lock"); err == nil {
		t.Fatal("lock left behind")
	}
}

// TestFailedSyncTakesRowsBack fails (strace, EIO) the fdatasync of a
// writer's intent, then, in another run, of its ok outcome. Begin and
// Finish said the row was not written, the Ledger refusing every later
// write since nothing is trusted after a failed fsync, and yet the row
// stayed in the file: the next Open read it, an intent whose attempt
// never spawned as an orphan, and an outcome as a recorded ok, which the
// next Begin under the key replayed instead of running it again as an
// orphan's key does. Now the rows are taken back: the ledger holds what
// was reported.
func TestFailedSyncTakesRowsBack(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (.ci/apt-packages lists it): no way to fail one fdatasync")
	}
	ctx := context.Background()
	for n, want := range []struct {
		rows    int // rows left in the ledger
		attempt int // the next Begin's attempt under the key
	}{{0, 1}, {1, 2}} {
		t.Run([]string{"intent", "outcome"}[n], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			cmd := child(t, "begin-finish-one-thread", path, "")
			cmd.Args = append([]string{strace, "-f", "-qq", "-o", "/dev/null", "-P", path,
				"-e", "trace=fdatasync", "-e", "inject=fdatasync:error=EIO:when=" + strconv.Itoa(n+1)}, cmd.Args...)
			cmd.Path = strace
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "failed to sync") {
				t.Fatalf("the writer with its fdatasync #%d failed: %v %s", n+1, err, out)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if rows := bytes.Count(b, []byte("\n")); rows != want.rows || len(b) > 0 && b[len(b)-1] != '\n' {
				t.Fatalf("the ledger after the failed sync: %d rows, want %d:\n%s", rows, want.rows, b)
			}
			l, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			dec, err := l.Begin(ctx, testIntent("sync-2", "k", "in"))
			if err != nil || dec.Replay != nil || dec.Attempt != want.attempt {
				t.Fatalf("the key again: %+v %v", dec, err)
			}
		})
	}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHelperHoldStore is not a test: run by TestGCWaitBesideOverlappingRuns
// as a process of its own, it holds the store of CRUXPROV_TEST_HOLD_HOME
// shared for CRUXPROV_TEST_HOLD_MS milliseconds, as a run does.
func TestHelperHoldStore(t *testing.T) {
	home := os.Getenv("CRUXPROV_TEST_HOLD_HOME")
	if home == "" {
		t.Skip("a helper process of TestGCWaitBesideOverlappingRuns")
	}
	ms, _ := strconv.Atoi(os.Getenv("CRUXPROV_TEST_HOLD_MS"))
	s, err := OpenExisting(home)
	if err != nil {
		t.Fatal(err)
	}
	lock := s.LockShared
	if os.Getenv("CRUXPROV_TEST_HOLD_EXCLUSIVE") != "" {
		lock = s.LockExclusive // a gc --wait (TestKilledGCLeavesNoGate)
	}
	unlock, err := lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	unlock()
}

// TestGCWaitBesideOverlappingRuns: a gc that waits for the store gets it
// once the processes that held it when it began to wait are done, though
// new holders keep coming and overlap. Before, flock gave a waiting
// exclusive taker no turn while a shared one held the store, and gc
// --wait beside overlapping runs waited for ever (seen with a shared
// holder every 0.5 s, each holding 1 s: gc --wait still waiting after 15 s).
func TestGCWaitBesideOverlappingRuns(t *testing.T) {
	s := open(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldStore$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CRUXPROV_TEST_HOLD_HOME="+s.Home(), "CRUXPROV_TEST_HOLD_MS=1000")
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); cmd.Wait() }()
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	// Once the holders overlap: the store is held.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		u, ok, err := s.TryLockExclusive()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		u()
		if time.Now().After(deadline) {
			t.Fatal("no helper took the store")
		}
	}
	time.Sleep(1500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.GC(ctx, GCOptions{Wait: true}); err != nil {
		t.Fatalf("gc --wait beside overlapping holders: %v", err)
	}
}

// gateHeld reports whether a waiting gc holds the store's gate.
func gateHeld(t *testing.T, s *Store) bool {
	t.Helper()
	g, err := os.Open(filepath.Join(s.Home(), gateName))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	return errors.Is(unix.Flock(int(g.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// TestLockSharedBehindWaitingGC: while a gc waits for the store, a new
// shared taker waits behind it, except one in a process that already
// holds the store shared (an install's fetch and creates take it again
// under the install's: held up, they would wait for the gc, which waits
// for them). Once the gc holds the store, it lets the gate go.
func TestLockSharedBehindWaitingGC(t *testing.T) {
	s := open(t)
	waitingGC := func() (chan error, *Unlock) {
		done, unlock := make(chan error, 1), new(Unlock)
		go func() {
			u, err := s.LockExclusive(context.Background())
			*unlock = u
			done <- err
		}()
		for deadline := time.Now().Add(time.Minute); !gateHeld(t, s); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiting gc holds no gate")
			}
		}
		return done, unlock
	}
	notYet := func(done chan error, what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("%s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Another process's holder (an open file of its own, which this
	// process does not count).
	other, err := os.Open(filepath.Join(s.Home(), lockName))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	done, unlockGC := waitingGC()
	if u, ok, err := s.TryLockShared(); err != nil || ok {
		if ok {
			u()
		}
		t.Fatalf("a shared taker beside a waiting gc went first (%v, %v)", ok, err)
	}
	notYet(done, "gc took the store beside a holder")
	other.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if gateHeld(t, s) {
		t.Error("gc holds the gate once it holds the store")
	}
	after := make(chan error, 1)
	go func() {
		u, err := s.LockShared(context.Background())
		if err == nil {
			u()
		}
		after <- err
	}()
	notYet(after, "a shared taker beside a gc holding the store")
	(*unlockGC)()
	if err := <-after; err != nil {
		t.Fatal(err)
	}

	// Nested: this process holds the store (an install), and takes it
	// again beside the gc that waits for it.
	outer, err := s.LockShared(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done, unlockGC = waitingGC()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inner, err := s.LockShared(ctx)
	if err != nil {
		t.Fatalf("a nested shared taker beside a waiting gc: %v", err)
	}
	inner()
	notYet(done, "gc took the store beside a holder")
	outer()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	(*unlockGC)()
}

// TestLockWithoutGate: a store made before the gate (and a user who may
// not make it: OpenExisting makes nothing) is locked without one.
func TestLockWithoutGate(t *testing.T) {
	s := open(t)
	os.Remove(filepath.Join(s.Home(), gateName))
	r, err := OpenExisting(s.Home())
	if err != nil {
		t.Fatal(err)
	}
	u, err := r.LockShared(context.Background())
	if err != nil {
		t.Fatalf("shared without a gate: %v", err)
	}
	u()
	u, err = r.LockExclusive(context.Background())
	if err != nil {
		t.Fatalf("exclusive without a gate: %v", err)
	}
	u()
	if _, err := os.Stat(filepath.Join(s.Home(), gateName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenExisting's lock made the gate: %v", err)
	}
	if _, err := Open(s.Home()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(s.Home(), gateName)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("Open made no gate 0644: %v %v", fi, err)
	}
}

// TestOnWait: a lock call that has to wait says so, once, before it
// waits, with what it waits for: a gc holding the store, a gc waiting
// for it (its gate), or (for a gc) the processes using it. Before, a
// run, fetch or install behind a waiting gc waited without a word.
func TestOnWait(t *testing.T) {
	s := open(t)
	var (
		mu   sync.Mutex
		said []Wait
		pids [][]int
	)
	s.OnWait(func(w Wait, p []int) { mu.Lock(); said, pids = append(said, w), append(pids, p); mu.Unlock() })
	heard := func() []Wait { mu.Lock(); defer mu.Unlock(); return append([]Wait(nil), said...) }
	// hold flocks name (another process's open file) how, for a while.
	hold := func(name string, how int) func() {
		f, err := os.Open(filepath.Join(s.Home(), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), how); err != nil {
			t.Fatal(err)
		}
		return func() { f.Close() }
	}
	for _, c := range []struct {
		name, file string
		held       int
		exclusive  bool
		want       Wait
	}{
		{"shared behind a gc holding the store", lockName, unix.LOCK_EX, false, WaitForGC},
		{"shared behind a gc waiting (its gate)", gateName, unix.LOCK_EX, false, WaitBehindGC},
		{"exclusive beside a run", lockName, unix.LOCK_SH, true, WaitForUsers},
		{"exclusive behind a waiting gc", gateName, unix.LOCK_EX, true, WaitForUsers},
	} {
		t.Run(c.name, func(t *testing.T) {
			said, pids = nil, nil
			release := hold(c.file, c.held)
			if !c.exclusive {
				if _, ok, err := s.TryLockShared(); ok || err != nil {
					t.Fatalf("%s: TryLockShared %v %v", c.name, ok, err)
				}
				if w := heard(); len(w) != 0 {
					t.Fatalf("%s: TryLockShared said it waits: %v", c.name, w)
				}
			}
			done := make(chan error, 1)
			go func() {
				lock := s.LockShared
				if c.exclusive {
					lock = s.LockExclusive
				}
				u, err := lock(context.Background())
				if err == nil {
					u()
				}
				done <- err
			}()
			for deadline := time.Now().Add(time.Minute); len(heard()) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: nothing said", c.name)
				}
			}
			time.Sleep(300 * time.Millisecond) // it polls meanwhile
			release()
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			mu.Lock()
			if len(said) != 1 || said[0] != c.want {
				t.Errorf("%s: said %v, want once %v", c.name, said, c.want)
			} else if len(pids[0]) != 1 || pids[0][0] != os.Getpid() {
				// The holder is this process's other open file.
				t.Errorf("%s: holders %v, want [%d]", c.name, pids[0], os.Getpid())
			}
			mu.Unlock()
		})
	}
	// Not waiting, nothing is said.
	said = nil
	u, err := s.LockShared(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u()
	if w := heard(); len(w) != 0 {
		t.Errorf("a lock that did not wait said %v", w)
	}
}

// TestKilledGCLeavesNoGate: a gc --wait killed (SIGKILL) while it waits
// for the store, holding the gate, takes its gate with it: the next
// shared taker goes on at once, and the next gc --wait gets the store.
func TestKilledGCLeavesNoGate(t *testing.T) {
	s := open(t)
	run, err := os.Open(filepath.Join(s.Home(), lockName)) // a run holds the store
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := unix.Flock(int(run.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	gc := exec.Command(os.Args[0], "-test.run=^TestHelperHoldStore$", "-test.count=1")
	gc.Env = append(os.Environ(), "CRUXPROV_TEST_HOLD_HOME="+s.Home(), "CRUXPROV_TEST_HOLD_MS=60000", "CRUXPROV_TEST_HOLD_EXCLUSIVE=1")
	if err := gc.Start(); err != nil {
		t.Fatal(err)
	}
	defer gc.Process.Kill()
	for deadline := time.Now().Add(time.Minute); !gateHeld(t, s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting gc holds no gate")
		}
	}
	gc.Process.Signal(unix.SIGKILL)
	gc.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := s.LockShared(ctx)
	if err != nil {
		t.Fatalf("a shared taker after the waiting gc was killed: %v", err)
	}
	u()
	run.Close()
	u, err = s.LockExclusive(ctx)
	if err != nil {
		t.Fatalf("gc --wait after the waiting gc was killed: %v", err)
	}
	u()
}

// TestExclusiveWaitersTakeTurns: two gc --wait (or a gc --wait and an
// env remove) waiting at once beside a run, and a run that starts while
// they wait, all get the store in turn: none waits for ever.
func TestExclusiveWaitersTakeTurns(t *testing.T) {
	s := open(t)
	run, err := os.Open(filepath.Join(s.Home(), lockName))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := unix.Flock(int(run.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 3)
	take := func(lock func(context.Context) (Unlock, error)) {
		u, err := lock(ctx)
		if err == nil {
			time.Sleep(50 * time.Millisecond)
			u()
		}
		done <- err
	}
	go take(s.LockExclusive)
	go take(s.LockExclusive)
	for deadline := time.Now().Add(time.Minute); !gateHeld(t, s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no waiting gc holds the gate")
		}
	}
	go take(s.LockShared)
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("a taker went on beside the run: %v", err)
	default:
	}
	run.Close()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitString: what a lock call waits for reads as words where a
// caller logs it with %v, as docs/executor.md's OnWait example does
// (walked as an integrator, it logged "waiting for the store: 2 [8451]").
func TestWaitString(t *testing.T) {
	for w, want := range map[Wait]string{
		WaitForGC:    "a gc (or env remove) is using the store",
		WaitBehindGC: "a gc that waits (or env remove) waits for the store and goes first",
		WaitForUsers: "the processes using the store are to finish first",
		Wait(9):      "Wait(9)",
	} {
		if got := fmt.Sprintf("%v", w); got != want {
			t.Errorf("%d: %q, want %q", int(w), got, want)
		}
	}
}

// TestLockWaitEndedIsWaitError: a lock call whose wait ctx ends (a
// signal, a caller's deadline) is a *WaitError wrapping ctx's error, which
// says which it was; callers tell "stopped while waiting, nothing done"
// from an interruption of their work by it.
func TestLockWaitEndedIsWaitError(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.LockExclusive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer u()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Another process's view: a fresh open of the lock file (flock locks
	// belong to the open file description).
	s2, err := Open(s.Home())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.LockShared(ctx)
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "gave up waiting for the store") {
		t.Fatalf("a shared lock past its deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = s2.LockExclusive(ctx)
	if !errors.As(err, &we) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted while waiting for the store") {
		t.Fatalf("an exclusive lock interrupted: %v", err)
	}
}

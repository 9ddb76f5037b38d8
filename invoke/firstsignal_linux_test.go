package invoke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
)

// TestCancelledBeforeTheHarnessTakesSIGTERM: where there is no /bin/sh
// the harness is the first process of the run's pid namespace until it
// forks its init (the kernel drops every signal that process has no
// handler for), and a cancel that came before it had (the interpreter's
// start, site's .pth files: tens of milliseconds) ends the run at once,
// recorded cancelled, and no provider runs. The executor's SIGTERM was
// dropped, and the harness went on to run the provider, to the grace's
// SIGKILL (2 s after a Ctrl-C of `cruxprov run`). The test holds the
// harness stopped (SIGSTOP, as soon as it has exec'd) through the cancel,
// the moment it would otherwise be in, and lets it go 800 ms later.
func TestCancelledBeforeTheHarnessTakesSIGTERM(t *testing.T) {
	f := fixture(t)
	defer invoke.WithoutShell()()
	cancelWhileStopped(t, f, &invoke.Subprocess{}, 800*time.Millisecond, func() int { return descendant(true, isHarness) }, func(pid int) bool {
		return !takes(pid, syscall.SIGTERM) // it has not forked its init
	})
}

// TestCancelledBehindBwrapEndsAtOnce: a run behind bwrap cancelled before
// its provider ran ends at once, recorded cancelled: while bwrap sets the
// sandbox up (it, and the init of the pid namespace it makes, have no
// handler for SIGTERM and drop it as first processes: the run is killed),
// and once the harness runs (pid 2 of bwrap's namespace, nested in the
// run's, which the executor's SIGTERM now reaches: it dies of it, exit
// status 143). The SIGTERM went to bwrap alone, which dropped it, and the
// run ended at the grace's SIGKILL (2 s), its provider never sent
// SIGTERM. bwrap is held stopped through the cancel and 800 ms after; the
// harness, whose SIGTERM waits for it to go on, 50 ms after (the
// provider, term, ignores SIGTERM once it runs).
func TestCancelledBehindBwrapEndsAtOnce(t *testing.T) {
	f := fixture(t)
	bwrap, real, version, _, _ := bwrapPython(t)
	b := invoke.BwrapFor(bwrap, real, version, "")
	t.Run("bwrap", func(t *testing.T) {
		cancelWhileStopped(t, f, &invoke.Subprocess{Sandbox: b}, 800*time.Millisecond, func() int {
			return descendant(false, func(pid int) bool { return argv0(pid) == bwrap })
		}, func(pid int) bool {
			return !hasChild(pid) // it has not made its namespace yet
		})
	})
	t.Run("harness", func(t *testing.T) {
		res := cancelWhileStopped(t, f, &invoke.Subprocess{Sandbox: b}, 50*time.Millisecond, func() int { return descendant(true, isHarness) }, func(pid int) bool {
			return !ignores(pid, syscall.SIGTERM) // the provider has not ignored SIGTERM yet
		})
		if res.ExitCode != 128+int(syscall.SIGTERM) {
			t.Errorf("exit status %d, want %d: the harness was not sent SIGTERM", res.ExitCode, 128+int(syscall.SIGTERM))
		}
	})
}

// cancelWhileStopped runs ex on the term entrypoint, stops the process
// find returns as soon as it is there, cancels the run while it is
// stopped and checks that the run ends at once, recorded cancelled,
// before the provider ran (which ignores SIGTERM); the process goes on
// resume after the cancel, as on a slow machine (a signal other than
// SIGKILL waits for that to kill it). When early says the stop came too late (the
// process past the moment the test is about), the run is cancelled and
// tried again, up to five times. It returns the run's result.
func cancelWhileStopped(t *testing.T, f invoketest.Fixtures, ex *invoke.Subprocess, resume time.Duration, find func() int, early func(pid int) bool) *invoke.Result {
	t.Helper()
	const grace = 3 * time.Second
	for attempt := 0; ; attempt++ {
		l, path := openLedger(t)
		ex.Ledger, ex.WorkdirParent, ex.Grace = l, t.TempDir(), grace
		token := fmt.Sprintf("cruxprov-first-sigterm-%d-%d", os.Getpid(), time.Now().UnixNano())
		t.Cleanup(func() {
			for _, p := range invoketest.ProcsWith(token) {
				syscall.Kill(p, syscall.SIGKILL)
			}
		})
		c := f.Call("term", map[string]string{"token": token}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
		c.Limits = invoke.Budgets{TimeoutMS: 60_000}
		ctx, cancel := context.WithCancelCause(context.Background())
		type ran struct {
			res *invoke.Result
			err error
		}
		done := make(chan ran, 1)
		go func() {
			res, err := ex.Run(ctx, c)
			done <- ran{res, err}
		}()
		pid := 0
		for deadline := time.Now().Add(30 * time.Second); pid == 0; {
			if pid = find(); pid != 0 {
				break
			}
			select {
			case r := <-done:
				t.Fatalf("the run ended before the process was seen: %v %+v", r.err, r.res)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("the process was not seen in 30 s")
			}
			time.Sleep(200 * time.Microsecond)
		}
		// Even the first process of a namespace takes SIGSTOP from its
		// parent's.
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for !stopped(pid) {
			time.Sleep(time.Millisecond)
		}
		// The executor is past its look at the context once the process
		// started when it has written the secret bundle (fd 3): a cancel
		// before that is the case TestRunInterruptedAsItsProcessStarts
		// covers (killed before the provider ran, exit code -1).
		// Stopped too late, the process has read the bundle already
		// (the harness closes fd 3; bwrap, past its fork, reuses it), or
		// ended: that is tried again below, as a stop past the moment.
		for deadline := time.Now().Add(10 * time.Second); !bundleWritten(pid) && secretPipe(pid) && early(pid); {
			if time.Now().After(deadline) {
				t.Fatal("the secret bundle was not written in 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		if !bundleWritten(pid) || !early(pid) {
			t.Logf("stopped too late: again")
			cancel(errors.New("again"))
			syscall.Kill(pid, syscall.SIGCONT)
			<-done
			if attempt == 4 {
				t.Skip("stopped too late five times")
			}
			continue
		}
		sent := time.Now()
		cancel(errors.New("interrupt signal received"))
		var r ran
		select {
		case r = <-done:
		case <-time.After(resume):
			syscall.Kill(pid, syscall.SIGCONT)
			r = <-done
		}
		took := time.Since(sent)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.res.Error == nil || r.res.Error.Code != invoke.CodeCancelled || !strings.Contains(r.res.Error.Message, "(interrupt signal received)") {
			t.Fatalf("the run: %s %+v", r.res.Status, r.res.Error)
		}
		if r.res.ExitCode == -1 {
			t.Fatalf("the run was cancelled before the executor's last look at the context: the test proves nothing (%s)", r.res.Error.Message)
		}
		if took > 500*time.Millisecond {
			t.Errorf("the run ended %s after the cancel (the grace is %s)", took, grace)
		}
		sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
		if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil || sr.Attempts[0].Outcome.ErrorCode != invoke.CodeCancelled {
			t.Fatalf("the ledger: %v %+v", err, sr)
		}
		t.Logf("ended %s after the cancel, exit status %d", took, r.res.ExitCode)
		return r.res
	}
}

// isHarness reports whether pid runs the harness (the interpreter, not a
// launcher in front of it).
func isHarness(pid int) bool {
	cl, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.HasPrefix(filepath.Base(argv0(pid)), "python") && bytes.Contains(cl, []byte("cruxible_provider_runtime.harness"))
}

// argv0 is pid's argv[0] ("" when it cannot be read).
func argv0(pid int) string {
	cl, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	a, _, _ := bytes.Cut(cl, []byte{0})
	return string(a)
}

// hasChild reports whether pid has a child.
func hasChild(pid int) bool {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		if b, _ := os.ReadFile(f); len(bytes.TrimSpace(b)) > 0 {
			return true
		}
	}
	return false
}

// descendant is a process of this process's (a child, or with deep any
// descendant) for which is holds, or 0.
func descendant(deep bool, is func(pid int) bool) int {
	var walk func(p string, depth int) int
	walk = func(p string, depth int) int {
		tasks, _ := filepath.Glob("/proc/" + p + "/task/*/children")
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(c)
				if is(pid) {
					return pid
				}
				if deep && depth < 8 {
					if d := walk(c, depth+1); d != 0 {
						return d
					}
				}
			}
		}
		return 0
	}
	return walk(strconv.Itoa(os.Getpid()), 0)
}

// bundleWritten reports whether the pipe on pid's fd 3 (the secret
// bundle's) holds bytes, read through /proc without reading them.
func bundleWritten(pid int) bool {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd/3", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
	return err == nil && n > 0
}

// secretPipe reports whether pid's fd 3 is still a pipe (the secret
// bundle's, until the process reads it and closes it).
func secretPipe(pid int) bool {
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/3")
	return err == nil && strings.HasPrefix(l, "pipe:")
}

// stopped reports whether pid is stopped (or gone).
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && (f[0] == "T" || f[0] == "t" || f[0] == "Z")
}

// takes reports whether pid catches or blocks sig (/proc/PID/status).
func takes(pid int, sig syscall.Signal) bool {
	return inMask(pid, sig, "SigCgt", "SigBlk")
}

// ignores reports whether pid ignores sig.
func ignores(pid int, sig syscall.Signal) bool {
	return inMask(pid, sig, "SigIgn")
}

// inMask reports whether sig is in one of pid's signal masks named.
func inMask(pid int, sig syscall.Signal, names ...string) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if !slices.Contains(names, k) {
			continue
		}
		m, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if m&(1<<(sig-1)) != 0 {
			return true
		}
	}
	return false
}

// TestCancelledBehindTheHarnessInitGetsSIGTERM: where there is no
// /bin/sh, a run cancelled once the harness has forked its init is sent
// SIGTERM, which the init passes on, and SIGKILL only after the grace
// (the term entrypoint ignores SIGTERM): the run is not killed at once
// for its first process being the harness's own.
func TestCancelledBehindTheHarnessInitGetsSIGTERM(t *testing.T) {
	f := fixture(t)
	defer invoke.WithoutShell()()
	const grace = 600 * time.Millisecond
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Grace: grace}
	token := fmt.Sprintf("cruxprov-init-sigterm-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, p := range invoketest.ProcsWith(token) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	c := f.Call("term", map[string]string{"token": token}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
	c.Limits = invoke.Budgets{TimeoutMS: 60_000}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var sent time.Time
	go func() {
		for deadline := time.Now().Add(30 * time.Second); len(invoketest.ProcsWith(token)) < 2 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		sent = time.Now()
		cancel(errors.New("interrupt signal received"))
	}()
	res, err := ex.Run(ctx, c)
	took := time.Since(sent)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != invoke.CodeCancelled {
		t.Fatalf("the run: %s %+v", res.Status, res.Error)
	}
	if took < grace {
		t.Errorf("the run ended %s after the cancel, within the grace (%s): killed, not sent SIGTERM", took, grace)
	}
}

package invoke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	for attempt := 0; ; attempt++ {
		if cancelledStopped(t, f) {
			return
		}
		if attempt == 4 {
			t.Skip("the harness had taken SIGTERM every time before the test could stop it")
		}
	}
}

// cancelledStopped runs the term entrypoint, stops its harness before it
// takes SIGTERM and cancels the run, and checks that the run ends at
// once; false when the harness had taken SIGTERM before it was stopped
// (the test proves nothing then).
func cancelledStopped(t *testing.T, f invoketest.Fixtures) bool {
	const grace = 3 * time.Second
	l, path := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Grace: grace}
	token := fmt.Sprintf("cruxprov-first-sigterm-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, p := range invoketest.ProcsWith(token) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	c := f.Call("term", map[string]string{"token": token}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
	c.Limits = invoke.Budgets{TimeoutMS: 60_000}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
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
		if pid = harnessChild(); pid != 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the run ended before its harness was seen: %v %+v", r.err, r.res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no harness started in 30 s")
		}
		time.Sleep(200 * time.Microsecond)
	}
	// The first process of a namespace takes SIGSTOP from its parent's.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for !stopped(pid) {
		time.Sleep(time.Millisecond)
	}
	if takes(pid, syscall.SIGTERM) {
		t.Logf("the harness took SIGTERM before it was stopped: again")
		cancel(errors.New("again"))
		syscall.Kill(pid, syscall.SIGCONT)
		<-done
		return false
	}
	sent := time.Now()
	cancel(errors.New("interrupt signal received"))
	var r ran
	select {
	case r = <-done:
	case <-time.After(800 * time.Millisecond):
		syscall.Kill(pid, syscall.SIGCONT) // as if the machine had been slow
		r = <-done
	}
	took := time.Since(sent)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Error == nil || r.res.Error.Code != invoke.CodeCancelled || !strings.Contains(r.res.Error.Message, "(interrupt signal received)") {
		t.Fatalf("the run: %s %+v", r.res.Status, r.res.Error)
	}
	if took > 500*time.Millisecond {
		t.Errorf("the run ended %s after the cancel (the grace is %s)", took, grace)
	}
	if left := invoketest.ProcsWith(token); len(left) > 0 {
		t.Errorf("the provider ran (its children %v)", left)
	}
	sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil || sr.Attempts[0].Outcome.ErrorCode != invoke.CodeCancelled {
		t.Fatalf("the ledger: %v %+v", err, sr)
	}
	t.Logf("ended %s after the cancel", took)
	return true
}

// harnessChild is a child of this process running the harness, or 0.
func harnessChild() int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(b)) {
			cl, _ := os.ReadFile("/proc/" + p + "/cmdline")
			if bytes.Contains(cl, []byte("cruxible_provider_runtime.harness")) {
				pid, _ := strconv.Atoi(p)
				return pid
			}
		}
	}
	return 0
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
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if k != "SigCgt" && k != "SigBlk" {
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

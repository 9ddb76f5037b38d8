package invoke

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/shim"
)

// Backend is what an executor other than Subprocess (package podman's
// container executor) gives Dispatch: a check of the call and how to
// start its process. Dispatch does the rest as Subprocess.Run does.
type Backend interface {
	// Name is the receipts' backend ("container").
	Name() string
	// Check refuses a call the backend cannot run; it is called after the
	// Verify hook and before the intent. unenforced names the limits it
	// cannot apply and was told to run without (the intent records them,
	// receipts.Intent.Unenforced); nil when every limit holds.
	Check(ctx context.Context, c *Call) (unenforced []string, err error)
	// Start starts one run (a *refusal.Error when the runtime cannot).
	Start(ctx context.Context, s *Spawn) (Process, error)
}

// Spawn is one run for a Backend to start: the protocol line for its
// stdin, the secret bundle for the descriptor shim.SecretChannel names
// (nil: no secret, the descriptor is not opened; the backend closes its
// write end once written), and the writers its stdout and stderr go to.
// Once the output budget is spent those writers read nothing more: the
// write that spent it is held until the run is killed (Process.Signal),
// then it and every later one is answered with an error. So the backend
// gives the run's own processes the pipes they are copied from (podman:
// --log-driver passthrough), with no relay in between, which a pipe no
// longer read would block, or kill with SIGPIPE, before the run is killed.
type Spawn struct {
	Call           *Call
	Attempt        string
	Request        []byte
	Bundle         []byte
	Budgets        Budgets
	Stdout, Stderr io.Writer
}

// Process is a started run.
type Process interface {
	// Wait blocks until every process of the run has ended and the
	// backend has cleaned up; it returns the exit code (128+N for a death
	// by signal N, as container runtimes report it; -1 when there is none)
	// and whether the executor's own kill ended it, or a *refusal.Error when the
	// run never started (container_unavailable). It is called once.
	Wait() (code int, signaled bool, err error)
	// Signal asks every process of the run to end: term is true for the
	// polite request (SIGTERM), false for SIGKILL.
	Signal(term bool)
}

// Failer is a Process whose backend may know, once Wait has returned,
// that its run failed in a way the exit status does not tell: the
// container was killed for memory (a SIGKILL from the kernel reads as
// any other SIGKILL), podman's client was killed from outside while
// the container ran (the container's exit status is then not the run's),
// or its stdout and stderr could not be read to their end (what was read
// may not be all the run wrote).
// Dispatch records such a run as an error, harness_exited with that
// message, whatever stdout held.
type Failer interface {
	// Failure is the message ("": none). Like the executor's own
	// messages it is not redacted: it must hold none of the run's bytes.
	Failure() string
}

// DispatchOptions are what Subprocess's fields are to Run.
type DispatchOptions struct {
	Ledger   Ledger
	Defaults Budgets
	Grace    time.Duration // 0: DefaultGrace
}

// DefaultGrace is how long a run has between SIGTERM and SIGKILL where
// its executor sets no Grace.
const DefaultGrace = 2 * time.Second

// Dispatch runs c on backend b with Subprocess.Run's steps and
// semantics: the Verify hook, b.Check, the intent (and a replay), the
// secrets resolved fresh, b.Start with one output budget billed on
// stdout and stderr, the timeout (Signal(true), then Signal(false) after
// Grace) and the flood kill, the result parsed from stdout, and the
// outcome with its redacted stderr tail.
func Dispatch(ctx context.Context, c *Call, b Backend, o DispatchOptions) (*Result, error) {
	st, replay, err := begin(ctx, c, b.Name(), o.Ledger, o.Defaults, func() ([]string, error) {
		if c.Object == "" || c.Entrypoint == "" {
			return nil, refusal.New(refusal.EntrypointUnknown, "the call names no entrypoint or object")
		}
		return b.Check(ctx, c)
	})
	if st == nil {
		return replay, err
	}
	grace := o.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	rec, red, budgets, attempt, bundle := st.rec, st.red, st.budgets, st.attempt, st.bundle
	call := *c
	call.Input = st.input
	line, err := Request(&call, attempt, budgets)
	if err != nil {
		return nil, rec.finishRefused(ctx, refusal.Wrap(refusal.InvokeFailed, err, "cannot encode the request"))
	}
	m := &meter{budget: budgets.OutputBytes, spent: make(chan struct{})}
	// Once the budget is spent the sinks read nothing more, and hold the
	// refused write until the run is killed (released): the run's next
	// write blocks meanwhile, rather than failing and letting it end on
	// its own terms before the kill lands.
	released := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(released) }) }
	defer release()
	stdout := &sink{m: m, hold: released}
	stderr := &sink{m: m, limit: StderrTail + 4096, hold: released}
	start := time.Now()
	p, err := b.Start(ctx, &Spawn{Call: &call, Attempt: attempt, Request: line, Bundle: bundle, Budgets: budgets, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, rec.finishRefused(ctx, err)
	}
	kill := func() {
		p.Signal(false)
		release()
	}
	type exit struct {
		code     int
		signaled bool
		err      error
	}
	done := make(chan exit, 1)
	go func() { c, s, err := p.Wait(); done <- exit{c, s, err} }()
	timer := time.NewTimer(time.Duration(budgets.TimeoutMS) * time.Millisecond)
	defer timer.Stop()
	var why string
	var ex exit
	select {
	case ex = <-done:
	case <-timer.C:
		why = CodeTimeout
	case <-m.spent:
		why = CodeOutputLimit
	case <-ctx.Done():
		why = CodeCancelled
	}
	if why == CodeOutputLimit {
		kill()
		ex = <-done
	} else if why != "" {
		p.Signal(true)
		select {
		case ex = <-done:
		case <-time.After(grace):
			kill()
			ex = <-done
		case <-m.spent:
			// A flood in the grace is killed at once: its write waits
			// for the kill (hold), which the grace would have delayed.
			kill()
			ex = <-done
		}
	} else {
		select {
		case <-m.spent:
			why = CodeOutputLimit
		default:
		}
	}
	if ex.err != nil {
		return nil, rec.finishRefused(ctx, ex.err)
	}
	out, outN := stdout.bytes()
	errb, errN := stderr.bytes()
	res := &Result{AttemptID: attempt, ExitCode: ex.code, StdoutBytes: outN, StderrBytes: errN, Budgets: budgets, Duration: time.Since(start), Egress: []string{}}
	tailb, cut := stderr.tail(StderrTail)
	tail := settle(ctx, res, why, budgets, red, tailb, cut, func() {
		var failure string
		if f, ok := p.(Failer); ok {
			failure = f.Failure()
		}
		if ex.signaled {
			res.Status = StatusError
			res.Error = &Error{Code: CodeExited, Message: "the harness was killed by a signal"}
		} else if failure != "" {
			res.Status = StatusError
			res.Error = &Error{Code: CodeExited, Message: failure}
		} else if code, ok := shimRefused(ex.code, out, errb, errN); ok {
			res.Status = StatusError
			res.Error = &Error{Code: CodeShimRefused, Message: "the container's entry shim refused before the harness started: shim_refused: " + code + " (docs/shim.md)"}
		} else {
			parseOutput(res, out, attempt)
		}
	})
	if err := rec.finish(ctx, res, tail); err != nil {
		return res, err
	}
	return res, nil
}

// CloseInherited marks every descriptor of this process above 2
// close-on-exec, so that one an embedding program opened without
// O_CLOEXEC does not reach a child (a Backend calls it before it starts
// its process). It returns an error, saying why and what to do, where it
// cannot (close_range(2) unavailable, and /proc/self/fd unreadable: no
// /proc, or this process out of descriptors): the Backend then refuses
// the run, starting nothing.
func CloseInherited() error { return cloexecAll() }

// OutOfFDs is what to do where err is a descriptor limit's: this
// process's (EMFILE) or the system's (ENFILE); "" for any other cause.
// A Backend's refusal adds it to its message, so that one caused by
// the limit says which limit and what to do.
func OutOfFDs(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return "this process is out of file descriptors: raise its limit, or run fewer runs at once"
	case errors.Is(err, syscall.ENFILE):
		return "the system is out of file descriptors: raise its limit, or run fewer processes at once"
	}
	return ""
}

// WatchExit returns a function that blocks until the child pid, started
// by this process and not yet reaped, has exited, without reaping it
// (waitid WNOWAIT): until the caller reaps it (cmd.Wait), the zombie
// keeps its pid and process group, so a signal sent to either meanwhile
// reaches no other process. The function reports whether the child is
// gone (exited, or already reaped); false where the kernel would not say,
// and nothing is known. Call WatchExit right after the child's Start,
// while nothing can have reaped it: it names the child by a pidfd opened
// then (where the kernel has them; by pid elsewhere), so that a wait
// that starts later cannot take a reused pid for it. Call the function
// once: it closes the pidfd. nil where there is no such wait (not Linux).
func WatchExit(pid int) (exited func() bool) { return exitWatch(pid) }

// shimRefused reports the code of the entry shim's refusal: exit
// shim.ExitRefused, nothing on stdout, and on stderr (errN bytes in all,
// errb their kept tail) the shim's one line and nothing else. Read as the
// harness's exit (harness_exited "the harness exited 78"), the shim's
// refusal (a secret pipe not written within its deadline, an exec that
// failed) was recorded as the provider's failure.
func shimRefused(code int, out, errb []byte, errN int64) (string, bool) {
	if code != shim.ExitRefused || len(out) != 0 || int64(len(errb)) != errN {
		return "", false
	}
	return shim.ParseRefused(errb)
}

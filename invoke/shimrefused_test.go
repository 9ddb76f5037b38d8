package invoke_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/shim"
)

// shimBackend runs argv as a container runtime runs its entrypoint: the
// real cruxshim in front, fd 3 the secret pipe's read end (its write end
// held open and never written when stall is set, as an executor that
// stalls).
type shimBackend struct {
	argv  []string
	stall bool
}

func (b *shimBackend) Name() string { return "container" }
func (b *shimBackend) Check(context.Context, *invoke.Call) ([]string, error) {
	return nil, nil
}

type shimProc struct {
	cmd *exec.Cmd
	w   *os.File
}

func (b *shimBackend) Start(ctx context.Context, s *invoke.Spawn) (invoke.Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.argv[0], b.argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = s.Stdout, s.Stderr, []*os.File{r}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.Close()
	if !b.stall {
		w.Write(s.Bundle)
		w.Close()
		w = nil
	}
	return &shimProc{cmd, w}, nil
}

func (p *shimProc) Wait() (int, bool, error) {
	err := p.cmd.Wait()
	if p.w != nil {
		p.w.Close()
	}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
				return 128 + int(ws.Signal()), false, nil
			}
			return ee.ExitCode(), false, nil
		}
		return -1, false, err
	}
	return 0, false, nil
}

func (p *shimProc) Signal(term bool) { p.cmd.Process.Kill() }

// TestShimRefusalIsNotTheProvidersFailure: a container run whose entry
// shim refuses (here its secret pipe is never written within the
// deadline) is recorded shim_refused naming the shim's code, not
// harness_exited "the harness exited 78" as if the provider had failed;
// a child that exits 78 after writing more than the shim's one line is
// still the harness's exit.
func TestShimRefusalIsNotTheProvidersFailure(t *testing.T) {
	sh := imagetest.Shim(t)
	ledger, err := receipts.Open(context.Background(), filepath.Join(t.TempDir(), "l.jsonl"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	call := func() *invoke.Call {
		return &invoke.Call{Provider: "p", Entrypoint: "e", Object: "m:f", Platform: "host", Input: []byte(`{}`),
			ImplementationDigest: digest.Sum([]byte("i")), MaterializationDigest: digest.Sum([]byte("m")), SealDigest: digest.Sum([]byte("s")),
			Secrets: []string{"acme/k"}, Resolve: func(context.Context, string) (string, error) { return "v", nil }}
	}
	fd := strconv.Itoa(shim.SecretFD)
	for _, tc := range []struct {
		name      string
		b         *shimBackend
		code, msg string
	}{
		{"pipe never written", &shimBackend{argv: []string{sh, "--secret-pipe-fd", fd, "--secret-pipe-timeout", "1", "--", "/bin/true"}, stall: true},
			invoke.CodeShimRefused, "the container's entry shim refused before the harness started: shim_refused: secret_pipe_timeout (docs/shim.md)"},
		{"a child's own exit 78", &shimBackend{argv: []string{sh, "--secret-pipe-fd", fd, "--", "/bin/sh", "-c", "echo Traceback >&2; echo 'shim_refused: secret_pipe_timeout' >&2; exit 78"}},
			invoke.CodeExited, "the harness exited 78"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := invoke.Dispatch(context.Background(), call(), tc.b, invoke.DispatchOptions{Ledger: ledger})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != invoke.StatusError || res.ExitCode != shim.ExitRefused || res.Error == nil || res.Error.Code != tc.code || res.Error.Message != tc.msg {
				t.Errorf("%+v %+v", res, res.Error)
			}
		})
	}
}

// TestOwnMessagesNotRedacted: with a one-letter secret ("a"), what the
// executor wrote itself (an exit status, a timeout) is not redacted
// letter by letter ("the h[redacted]rness exited 3"), while what the run
// wrote (its stderr tail in the receipt) still is.
func TestOwnMessagesNotRedacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	ledger, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	for _, tc := range []struct {
		argv    []string
		timeout int64
		msg     string
	}{
		{[]string{"/bin/sh", "-c", "echo 'a secret: a' >&2; exit 3"}, 0, "the harness exited 3"},
		{[]string{"/bin/sh", "-c", "kill -ABRT $$"}, 0, "the harness was killed by SIGABRT (aborted; exit status 134)"},
		{[]string{"/bin/sleep", "5"}, 300, "killed after the 300 ms timeout"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			c := &invoke.Call{Provider: "p", Entrypoint: "e", Object: "m:f", Platform: "host", Input: []byte(`{}`),
				ImplementationDigest: digest.Sum([]byte("i")), MaterializationDigest: digest.Sum([]byte("m")), SealDigest: digest.Sum([]byte("s")),
				Secrets: []string{"acme/k"}, Resolve: func(context.Context, string) (string, error) { return "a", nil },
				Budgets: invoke.Budgets{TimeoutMS: tc.timeout}}
			res, err := invoke.Dispatch(context.Background(), c, &shimBackend{argv: tc.argv}, invoke.DispatchOptions{Ledger: ledger, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.Error == nil || res.Error.Message != tc.msg {
				t.Errorf("%v: %+v", tc.argv, res.Error)
			}
		})
	}
	rep, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Attempts {
		if a.Outcome != nil && strings.Contains(a.Outcome.StderrTail, "a secret") {
			t.Errorf("the stderr tail is not redacted: %q", a.Outcome.StderrTail)
		}
	}
}

// failingBackend is shimBackend whose processes report failure
// (invoke.Failer), as the container backend does for a container killed
// for memory.
type failingBackend struct {
	shimBackend
	failure string
}

type failingProc struct {
	invoke.Process
	failure string
}

func (p failingProc) Failure() string { return p.failure }

func (b *failingBackend) Start(ctx context.Context, s *invoke.Spawn) (invoke.Process, error) {
	p, err := b.shimBackend.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	return failingProc{p, b.failure}, nil
}

// TestFailerSaysWhy: a Process that reports a failure (invoke.Failer)
// is recorded harness_exited with its message, whatever its exit status
// and stdout were; one that reports none is read as before.
func TestFailerSaysWhy(t *testing.T) {
	ledger, err := receipts.Open(context.Background(), filepath.Join(t.TempDir(), "l.jsonl"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	call := &invoke.Call{Provider: "p", Entrypoint: "e", Object: "m:f", Platform: "host", Input: []byte(`{}`),
		ImplementationDigest: digest.Sum([]byte("i")), MaterializationDigest: digest.Sum([]byte("m")), SealDigest: digest.Sum([]byte("s"))}
	for _, tc := range []struct {
		failure, code, msg string
	}{
		{"the provider ran out of memory", invoke.CodeExited, "the provider ran out of memory"},
		{"", invoke.CodeProtocolError, "the harness wrote no result on stdout"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			b := &failingBackend{shimBackend{argv: []string{"/bin/true"}}, tc.failure}
			res, err := invoke.Dispatch(context.Background(), call, b, invoke.DispatchOptions{Ledger: ledger})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != invoke.StatusError || res.ExitCode != 0 || res.Error == nil || res.Error.Code != tc.code || res.Error.Message != tc.msg {
				t.Errorf("failure %q: %+v %+v", tc.failure, res, res.Error)
			}
		})
	}
}

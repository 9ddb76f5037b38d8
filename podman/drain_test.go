package podman

import (
	"context"
	"fmt"
	"io"
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

// TestStdioDrainBounded: drain gives up at drainLimit on a stdout still
// held open, keeps what was read, and says it did not read to the end.
func TestStdioDrainBounded(t *testing.T) {
	setDrainLimit(t, 200*time.Millisecond)
	out := &slowWriter{}
	s, err := newStdio(nil, out, &tailWriter{w: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	// Another holder of stdout's write end, as a process the container
	// did not start would hold it: drain's close leaves it open.
	held, err := dupFile(s.child[1])
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := s.child[1].Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	s.started()
	start := time.Now()
	if s.drain() {
		t.Error("drain says it read stdout to its end, which is still held open")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("drain took %v, past its limit of %v", d, drainLimit)
	}

	// Closed by every holder: read to the end, and said so.
	s, err = newStdio(nil, io.Discard, &tailWriter{w: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	s.started()
	if !s.drain() {
		t.Error("drain says it did not read to the end of pipes closed by every writer")
	}
}

func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// TestDrainBoundFailsTheRun: a run whose stdout and stderr something
// other than the container still holds open once the container is gone
// (here a process the `podman run` wrapper left behind) is not ok: the
// drain stops at its limit, and what was read may not be all the run
// wrote. Before, the run was recorded ok, its result and byte counts
// those of the part read.
func TestDrainBoundFailsTheRun(t *testing.T) {
	drainBoundFails(t, &Executor{}, fixture(t))
}

func drainBoundFails(t *testing.T, base *Executor, f *invoketest.Container) {
	t.Helper()
	setDrainLimit(t, time.Second)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "holder.pid")
	// podman run (its globals, --runtime runc, come first) through a
	// wrapper that leaves a process holding the run's stdout and stderr
	// (a background command's stdin is /dev/null).
	wrapper := filepath.Join(dir, "podman")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$3\" = run ]; then sleep 120 & echo $! > %s; fi\nexec podman \"$@\"\n", pidFile)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	l, path := tempLedger(t)
	e := *base
	e.Podman, e.Ledger = wrapper, l
	res, err := e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("the wrapper left no process holding the pipes: %v", err)
	}
	const want = "still held open 1s after it had exited and been removed (exit status 0)"
	if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeExited || !strings.Contains(res.Error.Message, want) {
		t.Fatalf("a run whose pipes were still held: %s %+v; want error %s saying %q", res.Status, res.Error, invoke.CodeExited, want)
	}
	sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil {
		t.Fatalf("scan: %v %+v", err, sr)
	}
	if o := sr.Attempts[0].Outcome; o.Status != receipts.StatusError || !strings.Contains(o.ErrorMessage, want) || o.ResultDigest != "" {
		t.Errorf("the receipt %+v; want the run's error, no result", o)
	}
}

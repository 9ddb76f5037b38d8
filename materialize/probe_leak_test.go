package materialize

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// leakyPython is a wrapper interpreter that starts a sleeper holding its
// stdout and stderr, then execs python3 (by its path: the probe runs
// with no PATH): the probe's python exits, the pipe stays open for the
// sleeper's 60 s. The sleeper is killed when the test ends.
func leakyPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	dir := t.TempDir()
	pid := filepath.Join(dir, "sleeper.pid")
	w := filepath.Join(dir, "python")
	script := "#!/bin/sh\n(/bin/sleep 60 & echo $! >" + pid + ") ; exec " + py + " \"$@\"\n"
	if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pid); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return w
}

// probeWithin runs ProbeInterpreter(ctx, python) and fails the test if
// it has not returned within d.
func probeWithin(t *testing.T, ctx context.Context, python string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := ProbeInterpreter(ctx, python)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("ProbeInterpreter(%s) still waiting after %v for the process its interpreter left holding the output", python, d)
		return nil
	}
}

// TestProbeLeftProcessHoldingOutput: an interpreter that exits but
// leaves a process holding the probe's output is refused
// materialize_failed within a few seconds, naming the interpreter and
// what it did (the probe, and so env create and install, waited
// for that process to end); a signal meanwhile is an interruption,
// returned as promptly.
func TestProbeLeftProcessHoldingOutput(t *testing.T) {
	w := leakyPython(t)
	start := time.Now()
	err := probeWithin(t, context.Background(), w, 20*time.Second)
	t.Logf("refused after %v", time.Since(start))
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), "left a process running that holds its output open") {
		t.Fatalf("ProbeInterpreter(%s) = %v; want materialize_failed naming it and what it left", w, err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNamePython {
		t.Errorf("remedy %+v, want %s", r, refusal.ActionNamePython)
	}
	t.Run("interrupted", func(t *testing.T) {
		w := leakyPython(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(time.Second, cancel)
		err := probeWithin(t, ctx, w, 20*time.Second)
		if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
			t.Errorf("ProbeInterpreter interrupted: %v (code %q)", err, refusal.CodeOf(err))
		}
	})
}

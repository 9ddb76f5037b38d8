package materialize

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/leaktest"
	"github.com/cruxible/cruxprov/refusal"
)

// leakyPython is a wrapper interpreter that leaves a sleeper holding its
// stdout and stderr, then execs python3: the probe's python exits, the
// pipe stays open for the sleeper's 60 s (leaktest.Wrapper).
func leakyPython(t *testing.T) string {
	t.Helper()
	return leaktest.Wrapper(t, "python", "python3")
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

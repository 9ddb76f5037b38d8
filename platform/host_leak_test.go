package platform

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

// TestHostLeftProcessHoldingOutput: an interpreter that exits but leaves
// a process holding the probe's output is refused within a few seconds
// (it waited for that process to end: here 60 s, past any signal),
// naming the interpreter and what it did, with the remedy to name
// another.
func TestHostLeftProcessHoldingOutput(t *testing.T) {
	w := leakyPython(t)
	type answer struct {
		p   *Platform
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		p, err := Host(context.Background(), w)
		done <- answer{p, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Host(%s) still waiting after 20 s for the process its interpreter left holding the output", w)
	}
	t.Logf("refused after %v", time.Since(start))
	if !errors.Is(a.err, refusal.PlatformUnsupported) || !strings.Contains(a.err.Error(), w) || !strings.Contains(a.err.Error(), "left a process running that holds its output open") {
		t.Fatalf("Host(%s) = %v, %v; want platform_unsupported naming it and what it left", w, a.p, a.err)
	}
	if r := refusal.RemedyOf(a.err); r == nil || r.Action != refusal.ActionNamePython {
		t.Errorf("remedy %+v, want %s", r, refusal.ActionNamePython)
	}
}

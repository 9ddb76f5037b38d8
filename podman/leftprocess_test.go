package podman

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/leaktest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestPodmanLeftProcessHoldingOutput: a podman (here a wrapper named as
// it) that exits but leaves a process holding its stdout made every
// podman command of a run wait for that process, past its deadline and
// a signal; now the run is refused container_unavailable 2 s after
// podman ends, naming what it left. Without the bound the run waits out
// the sleeper's 60 s (the test gives up at 30).
func TestPodmanLeftProcessHoldingOutput(t *testing.T) {
	f := fixture(t)
	wrapper := leaktest.Wrapper(t, "podman", "podman")
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := (&Executor{Podman: wrapper, UnenforcedLimits: true}).Run(context.Background(), c)
		done <- err
	}()
	select {
	case err := <-done:
		if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "left a process running that holds its output open") {
			t.Fatalf("after %v: %v, want container_unavailable naming the process left", time.Since(start), err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("refused after %v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run still waits 30 s on for the process its podman left")
	}
}

package podman

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
)

// TestTimeoutExitZeroSaysSo: a container run whose provider ends itself
// on the timeout's SIGTERM and exits 0 is recorded timeout with that exit
// status, 0 (the harness's own: docs/receipts.md, exit_code), and says it
// stopped at the timeout and exited 0 after the SIGTERM; it said "killed
// after the 8000 ms timeout" beside exit code 0.
func TestTimeoutExitZeroSaysSo(t *testing.T) {
	timeoutExitZero(t, &Executor{}, fixture(t))
}

func timeoutExitZero(t *testing.T, base *Executor, f *invoketest.Container) {
	t.Helper()
	e := *base
	e.Grace = 10 * time.Second
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c",
		"import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); time.sleep(60)"}
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	// Long enough for the container to start and the handler to be
	// installed on a loaded machine.
	c.Limits.TimeoutMS = 8000
	res, err := e.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusTimeout || res.ExitCode != 0 || res.Error == nil || res.Error.Code != invoke.CodeTimeout {
		t.Fatalf("status %s, exit %d, %+v; want timeout, exit 0", res.Status, res.ExitCode, res.Error)
	}
	const want = "stopped at the 8000 ms timeout: it exited 0 after the executor's SIGTERM"
	if !strings.HasPrefix(res.Error.Message, want) || strings.Contains(res.Error.Message, "killed") {
		t.Errorf("the message %q; want it to start %q, and not to say killed", res.Error.Message, want)
	}
}

package invoke_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// TestTimeoutExitZeroSaysSo: a run that ends itself on the timeout's
// SIGTERM and exits 0 (here its launcher's trap) is recorded timeout with
// its own exit status, 0, and says it stopped there and exited 0, not
// that it was killed: the outcome read "killed after the 2000 ms timeout"
// beside exit_code 0, which an operator, or a pipeline reading the exit
// code, took for a run that had ended well (docs/receipts.md, exit_code).
func TestTimeoutExitZeroSaysSo(t *testing.T) {
	f := fixture(t)
	l, path := openLedger(t)
	// A launcher in front of the harness whose trap exits 0 on SIGTERM;
	// the harness (term) ignores it. stdin, the protocol line, reaches
	// the harness started in the background through fd 9 (sh gives a
	// background command /dev/null; fd 3 and 4 are the run's).
	trap := invoke.Launcher{"/bin/sh", "-c", `exec 9<&0; trap 'exit 0' TERM; "$@" <&9 9<&- & wait`, "sh"}
	ex := &invoke.Subprocess{Ledger: l, Grace: 3 * time.Second, WorkdirParent: t.TempDir(), Sandbox: trap}
	c := f.Call("term", map[string]string{"token": "timeoutexitzero"}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Limits.TimeoutMS = 2000
	res, err := ex.Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusTimeout || res.ExitCode != 0 || res.Error == nil || res.Error.Code != invoke.CodeTimeout {
		t.Fatalf("status %s, exit %d, %+v; want timeout, exit 0", res.Status, res.ExitCode, res.Error)
	}
	const want = "stopped at the 2000 ms timeout: it exited 0 after the executor's SIGTERM"
	if !strings.HasPrefix(res.Error.Message, want) || strings.Contains(res.Error.Message, "killed") {
		t.Errorf("the message %q; want it to start %q, and not to say killed", res.Error.Message, want)
	}
	sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil {
		t.Fatalf("scan: %v %+v", err, sr)
	}
	o := sr.Attempts[0].Outcome
	if o.Status != string(invoke.StatusTimeout) || o.ExitCode != 0 || o.ErrorMessage != res.Error.Message {
		t.Errorf("the receipt: %s, exit %d, %q; want the run's", o.Status, o.ExitCode, o.ErrorMessage)
	}
}

package podman

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
)

// TestOutputLimitStopsTheContainer: once stdout and stderr have spent the
// output budget the container executor reads nothing more of them, and
// the container is killed where the budget was spent, then removed. It
// drained podman's client on, discarding, while `podman kill` took its
// few hundred milliseconds: a flood of 2,000,000 bytes on each of fd 1
// and fd 2 against a budget of 1 MiB was read to its last byte and wrote
// its result (exit 0 or killed after it) in every run, recorded
// output_limit. Stopping the reads alone was no fix: the client relayed
// the container's output, and conmon, blocked on a client no longer read,
// made `podman kill --signal KILL` wait 6 s for the exit it records; and
// a write refused at once let the harness write an error result and exit
// on its own before the kill. Now podman hands the container the pipes
// (--log-driver passthrough) and the refused write waits for the kill.
func TestOutputLimitStopsTheContainer(t *testing.T) {
	outputLimitStops(t, &Executor{}, fixture(t))
}

func outputLimitStops(t *testing.T, base *Executor, f *invoketest.Container) {
	t.Helper()
	ctx := context.Background()
	l, path := tempLedger(t)
	e := *base
	e.Ledger = l
	const budget = 1 << 20
	var runs []*invoke.Result
	for i := range 3 {
		c := f.Call("flood", map[string]int{"bytes": 2_000_000}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
		c.Limits.OutputBytes = budget
		res, err := e.Run(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res)
		if res.Status != invoke.StatusOutputLimit || res.Error == nil || res.Error.Code != invoke.CodeOutputLimit {
			t.Fatalf("run %d: status %s (%+v), want output_limit", i, res.Status, res.Error)
		}
		// Past the budget: at most the read that spent it (os/exec copies
		// 32 KiB at a time). Before, all 4,000,000 bytes.
		if n := res.StdoutBytes + res.StderrBytes; n >= budget+64<<10 {
			t.Errorf("run %d: %d bytes read of a budget of %d (%d past it)", i, n, budget, n-budget)
		}
		// The flood's fd 1 is the stderr pipe (the runtime takes its
		// result channel off fd 1): anything on stdout is a result, the
		// flood's own or the harness's error, written past the budget.
		if res.StdoutBytes != 0 {
			t.Errorf("run %d: %d bytes on the result channel: the provider returned after its budget was spent", i, res.StdoutBytes)
		}
		// Killed by the executor's SIGKILL (137), or removed with its
		// status (-1): not ended on its own.
		if res.ExitCode != 137 && res.ExitCode != -1 {
			t.Errorf("run %d: exit code %d: the container ended on its own, not killed at its budget", i, res.ExitCode)
		}
		out, err := exec.Command(e.podman(), "ps", "--all", "--filter", "name=cruxprov-"+res.AttemptID, "--format", "{{.Names}}").Output()
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("run %d: containers left behind: %s", i, s)
		}
	}
	sc, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Attempts) != len(runs) {
		t.Fatalf("%d attempts in the ledger, want %d", len(sc.Attempts), len(runs))
	}
	for i, a := range sc.Attempts {
		o, res := a.Outcome, runs[i]
		if o == nil || a.Intent.AttemptID != res.AttemptID || o.Status != receipts.StatusOutputLimit || o.ErrorCode != invoke.CodeOutputLimit ||
			o.ExitCode != res.ExitCode || o.StdoutBytes != res.StdoutBytes || o.StderrBytes != res.StderrBytes {
			t.Errorf("run %d: the receipt %+v is not the run's output_limit %+v", i, o, res)
		}
	}
}

// tempLedger opens a receipts ledger in a fresh directory of t's, closed
// when t ends, and returns it and its path.
func tempLedger(t *testing.T) (*receipts.Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	l, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

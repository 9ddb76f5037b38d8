package invoke_test

import (
	"testing"

	"github.com/cruxible/cruxprov/invoke"
)

// TestOutputLimitStopsReading: once stdout and stderr have spent the
// output budget the executor reads nothing more of them, so a flood is
// stopped where the budget is spent, not where the kill lands. The sinks
// drained the pipes on ("discard: the run is being killed") while the
// SIGKILL was on its way: a provider writing 2 MB to stderr against a
// budget of 1 MiB wrote all of it and returned its result, exit 0, in
// half the runs (found walking executor.md with acme-echo's flood), and a
// flood of 64 MiB was read for megabytes past its budget.
func TestOutputLimitStopsReading(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, Grace: 500_000_000, WorkdirParent: t.TempDir()}
	const budget = 1 << 20
	for i := range 5 {
		c := f.Call("flood", map[string]int{"bytes": 64 << 20}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
		c.Limits.OutputBytes = budget
		res, err := ex.Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != invoke.StatusOutputLimit {
			t.Fatalf("status %s (%+v), want output_limit", res.Status, res.Error)
		}
		// Past the budget: at most the read that spent it (os/exec
		// copies 32 KiB at a time; this runtime's fd 1 and fd 2 share one
		// pipe). Before, 64 KiB to 352 KiB more were read while the kill
		// landed.
		if n := res.StdoutBytes + res.StderrBytes; n >= budget+64<<10 {
			t.Errorf("run %d: %d bytes read of a budget of %d (%d past it)", i, n, budget, n-budget)
		}
	}
}

package invoke_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
)

// TestCancelledSaysWhy: a run whose context was cancelled with a cause
// (signal.NotifyContext gives one naming the signal: cruxprov run
// interrupted with Ctrl-C) was recorded "the caller cancelled the run
// (context canceled)", the cause dropped. The message carries the cause.
func TestCancelledSaysWhy(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Grace: 200 * time.Millisecond}
	token := "cruxprov-cancelled-says-why"
	t.Cleanup(func() {
		for _, p := range invoketest.ProcsWith(token) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(time.Second, func() { cancel(errors.New("interrupt signal received")) })
	c := f.Call("term", map[string]string{"token": token}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
	c.Limits = invoke.Budgets{TimeoutMS: 60_000}
	res, err := ex.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != invoke.CodeCancelled || !strings.Contains(res.Error.Message, "the caller cancelled the run (interrupt signal received)") {
		t.Errorf("%s %+v", res.Status, res.Error)
	}
}

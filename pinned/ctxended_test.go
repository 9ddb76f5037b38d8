package pinned_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
)

// TestRunCtxEndedInItsPinCheck: a run whose context ends while its pin
// is checked returns ctx's error, as its godoc says, not a
// *pinned.VerifyError, which docs/executor.md has an executor read as a
// refusal at the pin (with no refusal inside), and writes nothing to the
// ledger.
func TestRunCtxEndedInItsPinCheck(t *testing.T) {
	dir := t.TempDir()
	reg, err := registry.OpenDirReadOnly(context.Background(), filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.jsonl")
	led, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for name, ctx := range map[string]context.Context{"canceled": canceled, "past its deadline": expired} {
		res, err := pinned.Run(ctx, reg, pinned.Request{Provider: "acme-echo", Entrypoint: "echo", Input: []byte(`{}`),
			Verify: verify.Options{StateDir: filepath.Join(dir, "state")}}, pinned.Local{Executor: invoke.Subprocess{Ledger: led}})
		var ve *pinned.VerifyError
		if res != nil || !errors.Is(err, ctx.Err()) || errors.As(err, &ve) {
			t.Errorf("a run whose context is %s: %+v, %#v; want ctx's error, not a *pinned.VerifyError", name, res, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the ledger: %v %v, want empty", fi, err)
	}
}

package watch_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/watch"
)

// TestNoVerifyIsNoDrift: a call whose Verify is a Verifier without a
// verify function (or that returns ErrNoVerify itself) is refused
// invoke_failed, its receipt in the ledger saying that nothing was
// verified. It was recorded refused env_drift, "verify refused the run":
// a drift of the env that nobody had looked at.
func TestNoVerifyIsNoDrift(t *testing.T) {
	ctx := context.Background()
	for name, verify := range map[string]func(context.Context) error{
		"a Verifier without a verify function": watch.NewVerifier(watch.Spec{Env: t.TempDir()}, nil).Verify,
		"a nil Verifier":                       (*watch.Verifier)(nil).Verify,
		"ErrNoVerify itself":                   func(context.Context) error { return watch.ErrNoVerify },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.jsonl")
			led, err := receipts.Open(ctx, path, receipts.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer led.Close()
			ex := &invoke.Subprocess{Ledger: led, WorkdirParent: t.TempDir()}
			res, err := ex.Run(ctx, &invoke.Call{Provider: "acme-echo", Entrypoint: "echo", Object: "acme_echo:Echo",
				ImplementationDigest: digest.Sum([]byte("i")), MaterializationDigest: digest.Sum([]byte("m")), SealDigest: digest.Sum([]byte("s")),
				Platform: "cp311-manylinux_2_36_x86_64", Input: []byte(`{}`), Verify: verify})
			var rr *invoke.RecordedRefusal
			if res != nil || !errors.Is(err, watch.ErrNoVerify) || refusal.CodeOf(err) != refusal.InvokeFailed || !errors.As(err, &rr) {
				t.Fatalf("Run = %+v, %v; want a recorded invoke_failed that errors.Is ErrNoVerify", res, err)
			}
			if errors.Is(err, refusal.EnvDrift) || strings.Contains(err.Error(), "drift") {
				t.Errorf("the refusal says the env drifted: %v", err)
			}
			if !strings.Contains(err.Error(), "nothing was verified") {
				t.Errorf("the refusal does not say that nothing was verified: %v", err)
			}
			r, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Attempts) != 1 || r.Attempts[0].Outcome == nil {
				t.Fatalf("the ledger holds %+v, want the refused attempt", r.Attempts)
			}
			o := r.Attempts[0].Outcome
			if r.Attempts[0].Intent.AttemptID != rr.AttemptID || o.Status != receipts.StatusRefused ||
				o.ErrorCode != string(refusal.InvokeFailed) || !strings.Contains(o.ErrorMessage, "nothing was verified") {
				t.Errorf("the receipt: %+v %+v, want refused invoke_failed saying nothing was verified", r.Attempts[0].Intent, o)
			}
		})
	}
	// An invoke_failed refusal of another cause is not ErrNoVerify.
	if errors.Is(refusal.New(refusal.InvokeFailed, "the sandbox could not start"), watch.ErrNoVerify) {
		t.Error("another invoke_failed refusal reads as ErrNoVerify")
	}
}

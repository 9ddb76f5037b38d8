package watch_test

import (
	"context"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/watch"
)

// An executor that stays up wraps its full verify in a Verifier and checks
// what must be checked on every call whatever the files say, the pin's
// expiry, around it.
func ExampleVerifier() {
	ctx := context.Background()
	env := "/home/op/.local/share/cruxprov/envs/0f3a…" // as the accepted pin names it
	registryDir := "/home/op/.local/share/cruxprov/registry"
	var validUntil time.Time // set by each full verify: verify.Report.ValidUntil (zero: no expiry)

	v := watch.NewVerifier(watch.Spec{Env: env, Extra: []string{registryDir}}, func(ctx context.Context) error {
		// The pin-level verify goes here (verify.Verify, which checks the
		// seal too): it also sets validUntil from its report.
		_, err := seal.Verify(ctx, env, seal.Options{})
		return err
	})
	defer v.Close()
	check := func(ctx context.Context) error {
		if err := v.Verify(ctx); err != nil {
			return err
		}
		if !validUntil.IsZero() && !time.Now().Before(validUntil) {
			return refusal.New(refusal.PinExpired, "the accepted pin expired at %s", validUntil.Format(time.RFC3339))
		}
		return nil
	}
	ex := &invoke.Subprocess{}
	_, _ = ex.Run(ctx, &invoke.Call{Env: env, Python: seal.PythonLink, Verify: check /* … */})
}

package pinned_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/verify"
	"github.com/cruxible/cruxprov/watch"
)

// TestWatchedVerifiesOnceAtFirst: docs/executor.md's "Watching an env"
// example, as written there (keep the two the same), runs the full
// verify once on its first call, none on a call after it while nothing
// changed, and once when a file of the env changes. It verified twice on
// the first call: once to learn the env the pin names, and once more in
// the Verifier, which is dirty until its first Verify places its watches.
func TestWatchedVerifiesOnceAtFirst(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	reg, home, state := w.reg, w.home, w.state
	var fulls atomic.Int64

	// Once: the full verify is the pin-level one; it keeps the last report that passed.
	vo := verify.Options{Entrypoint: "startup", StateDir: state}
	var last atomic.Pointer[verify.Report]
	fullVerify := func(ctx context.Context) error {
		fulls.Add(1) // the test's count
		rep, err := verify.Verify(ctx, reg, fixtures.HostileName, vo)
		if err != nil {
			return err
		}
		last.Store(rep)
		return nil
	}
	newVerifier := func(env string) *watch.Verifier {
		return watch.NewVerifier(watch.Spec{Env: env, Extra: []string{reg.Root()}}, fullVerify)
	}
	var v *watch.Verifier // made at the first run, for the env the pin names
	var watched string
	defer func() {
		if v != nil {
			v.Close()
		}
	}()

	// One call, up to the Call built; ex.Run(ctx, call) is left out: the
	// provider is not what is counted.
	run := func() (*invoke.Call, error) {
		// Before every run (one goroutine at a time, or guard v and watched): the
		// store held shared from the check to the run's end, as pinned.Run holds it,
		// so that gc --envs does not remove the env under the run.
		unlock, err := pinned.HoldStore(ctx, home, nil)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if v == nil { // the env the pin names, from the pin alone: v's first Verify is the full one
			if watched, err = verify.PinnedEnv(ctx, reg, fixtures.HostileName, vo); err != nil {
				return nil, err
			}
			v = newVerifier(watched)
		}
		verr := v.Verify(ctx) // a full verify at first, then O(1) while nothing changed
		rep := last.Load()
		if rep == nil { // no full verify has passed yet: no call to build
			return nil, verr
		}
		if verr == nil && rep.Env != watched { // another pin was accepted, naming another env: watch that one
			v.Close()
			watched = rep.Env
			v = newVerifier(watched)
			verr = v.Verify(ctx)
			rep = last.Load()
		}
		if verr == nil {
			verr = rep.Unexpired(time.Now()) // the pin's expiry: on every call, whatever the files say
		}
		req := w.request("startup", "{}")
		call := pinned.Call(rep, req) // as pinned.Run builds it (Runtime set), from the report verified last
		if call == nil {              // the pin has no entrypoint req.Entrypoint
			return nil, pinned.NoCall(rep, req) // entrypoint_unknown, naming those it has
		}
		call.Verify = func(context.Context) error { return verr } // a refusal is recorded in the ledger
		return call, verr
	}

	for i, want := range []int64{1, 1} {
		if call, err := run(); err != nil || call == nil || call.Env != last.Load().Env {
			t.Fatalf("call %d: %+v %v", i+1, call, err)
		}
		if got := fulls.Load(); got != want {
			t.Fatalf("after call %d: %d full verifies, want %d", i+1, got, want)
		}
	}
	// A change to the env: the next call verifies fully, once, and refuses.
	env := last.Load().Env
	os.Chmod(env, 0o755)
	if err := os.WriteFile(filepath.Join(env, "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(); refusal.CodeOf(err) != refusal.EnvDrift {
		t.Errorf("a call after the env changed: %v, want env_drift", err)
	}
	if got := fulls.Load(); got != 2 {
		t.Errorf("after the change: %d full verifies, want 2", got)
	}
	// The example in the doc is this one: it learns the env from the pin
	// and never calls the full verify but through the Verifier.
	doc, err := os.ReadFile(filepath.Join("..", "docs", "executor.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```go\n// Once: the full verify is the pin-level one")
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "verify.PinnedEnv(ctx, reg,") || strings.Contains(block, "fullVerify(ctx)") ||
		!strings.Contains(block, "if call == nil {") || !strings.Contains(block, "return pinned.NoCall(rep, req)") {
		t.Errorf("docs/executor.md's watched example is not this test's: %s", block)
	}
}

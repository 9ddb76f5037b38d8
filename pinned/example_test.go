package pinned_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify"
	"github.com/cruxible/cruxprov/watch"
)

// An in-process executor runs a provider on its accepted pin as
// `cruxprov run` does (docs/executor.md, "In-process, with the Go API").
func ExampleRun() {
	ctx := context.Background()
	home := "/home/op/.local/share/cruxprov" // the operator's store
	state := "/var/lib/executor/cruxprov"    // this executor's floors and ledger
	reg, err := registry.OpenDirReadOnly(ctx, filepath.Join(home, "registry"))
	if err != nil {
		log.Fatal(err)
	}
	led, err := receipts.Open(ctx, filepath.Join(state, "receipts", "exec.jsonl"), receipts.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer led.Close()
	lo := pinned.Local{
		Home:     home,
		OnWait:   func(w store.Wait, pids []int) { log.Printf("waiting for the store (%v, pids %v)", w, pids) },
		Executor: invoke.Subprocess{Ledger: led, WorkdirParent: os.TempDir()},
	}
	res, err := pinned.Run(ctx, reg, pinned.Request{
		Provider: "acme-echo", Entrypoint: "echo", Input: json.RawMessage(`{"hello": "world"}`),
		Resolve: func(_ context.Context, ref string) (string, error) { return "", errors.New("no secrets here") },
		Limits:  invoke.Budgets{TimeoutMS: 5000},
		Environ: os.Environ(), Allow: []string{"LANG"},
		Verify: verify.Options{StateDir: state},
	}, lo)
	var ve *pinned.VerifyError
	switch {
	case errors.As(err, &ve):
		log.Printf("refused at the pin, nothing recorded: %v", ve.Err)
	case err != nil && res == nil:
		log.Printf("refused, nothing ran: %v", err)
	case err != nil:
		log.Printf("ran (%s), its outcome not recorded: %v", res.Status, err)
	default:
		log.Printf("%s: %s", res.Status, res.Value)
	}
}

// An executor that stays up learns the env from the pin, verifies fully
// once, then watches (package watch), and builds each run's call from the
// report verified last with pinned.Call, as pinned.Run builds it
// (docs/executor.md, "Watching an env").
func ExampleCall() {
	ctx := context.Background()
	home, state := "/home/op/.local/share/cruxprov", "/var/lib/executor/cruxprov"
	reg, err := registry.OpenDirReadOnly(ctx, filepath.Join(home, "registry"))
	if err != nil {
		log.Fatal(err)
	}
	req := pinned.Request{Provider: "acme-echo", Entrypoint: "echo", Input: json.RawMessage(`{}`)}
	vo := verify.Options{Entrypoint: req.Entrypoint, StateDir: state, Store: home}
	var last *verify.Report
	full := func(ctx context.Context) error {
		rep, err := verify.Verify(ctx, reg, req.Provider, vo)
		if err == nil {
			last = rep
		}
		return err
	}
	// The env the pin names, from the pin alone: the Verifier's first
	// Verify is the full one, once its watches are placed.
	env, err := verify.PinnedEnv(ctx, reg, req.Provider, vo)
	if err != nil {
		log.Fatal(err)
	}
	v := watch.NewVerifier(watch.Spec{Env: env, Extra: []string{reg.Root()}}, full)
	defer v.Close()
	ex := &invoke.Subprocess{WorkdirParent: os.TempDir()}

	// Every run: the store held from the check to the run's end.
	unlock, err := pinned.HoldStore(ctx, home, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer unlock()
	verr := v.Verify(ctx) // a full verify at first, then O(1) while nothing changed
	if last == nil {      // none has passed yet: nothing to build a call from
		log.Fatal(verr)
	}
	if verr == nil {
		verr = last.Unexpired(time.Now())
	}
	call := pinned.Call(last, req)
	if call == nil { // the pin has no entrypoint req.Entrypoint
		log.Fatal(pinned.NoCall(last, req))
	}
	call.Verify = func(context.Context) error { return verr }
	res, err := ex.Run(ctx, call)
	log.Print(res, err)
}

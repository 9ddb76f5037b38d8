// Package pinned runs a provider on its accepted pin, as one call: the
// composition DESIGN §1 draws as "invoke/: verify → spawn → receipts",
// which `cruxprov run` and an in-process executor both make the same way.
// Run holds the store's lock shared from the verification to the run's
// end (so that gc --envs never removes the env under the run), verifies
// the pin (verify.Verify), builds the invoke.Call from the verified report
// (Call: the pin's digests, the manifest's budgets, secrets and egress,
// the runtime that picks the channel's wiring, the caller's limits, input,
// key and environment) with the verification's outcome as its first step
// (a refusal found after the pin was read is recorded in the ledger), and
// runs it with invoke.Subprocess (a bwrap sandbox showing the sealed
// interpreter, when asked). Package pinned/container is the same for a
// container materialization, with podman.
//
// It owns that composition only: the checks are package verify's, the
// run and its receipts package invoke's, the lock package store's. It
// never prints, never reads the environment (the caller passes what a
// provider may see), and returns refusals typed as their packages give
// them. It does not reach the build side, the image code or podman
// (internal/archtest): an executor that runs local envs imports it alone.
//
// Linux only, as package verify (package seal's checks): invoke, which
// runs the call, builds for macOS too.
package pinned

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify"
)

// Request is one run of a provider's entrypoint on its accepted pin.
type Request struct {
	// Provider and Entrypoint name what runs, as the pin names them.
	Provider, Entrypoint string
	// Input is the request's input, one JSON value.
	Input json.RawMessage
	// Resolve resolves the secret refs the pin's manifest declares,
	// afresh on every run (nil: none can be resolved).
	Resolve invoke.SecretResolver
	// Limits are the caller's budgets: they lower the manifest's, never
	// raise them (zero fields: the manifest's).
	Limits invoke.Budgets
	// IdempotencyKey, when set, replays a recorded ok outcome for the
	// same key and input (DESIGN §10).
	IdempotencyKey string
	// Environ is the environment the provider's is chosen from ("K=V";
	// cmd passes os.Environ()): only the names in Allow pass.
	Environ, Allow []string
	// Verify are the verification's options (platform, state directory,
	// registry id, …); its Entrypoint is Request.Entrypoint.
	Verify verify.Options
	// OnPin, when set, is called with the pin's provider spec once the
	// verification has named what runs, before the run (also when the
	// verification then refused, a refusal the ledger records): the
	// caller may check its own arguments against what the pin declares
	// (cruxprov run warns of a --secret the manifest does not declare).
	OnPin func(spec *registry.Provider)
}

// Local is how Run runs a local env.
type Local struct {
	// Home is the store's directory: its lock is held shared from the
	// verification to the run's end (HoldStore). "": the store is not
	// locked, and a gc --envs may remove the env under the run.
	Home string
	// OnWait, when set, is called when the lock has to wait (a gc holds
	// the store or waits for it), before it waits (store.Store.OnWait).
	OnWait func(w store.Wait, pids []int)
	// Bwrap runs the provider in the bubblewrap preset, showing the env
	// and what its sealed interpreter needs (Bwrap).
	Bwrap bool
	// Executor is the subprocess executor's settings: its Ledger,
	// WorkdirParent, Grace, Defaults, NoNamespaces. Its Sandbox is
	// replaced when Bwrap is set.
	Executor invoke.Subprocess
}

// VerifyError is a verification refused before the pin named what would
// run (pin_unapproved, signature_invalid, pin_expired, registry_corrupt,
// entrypoint_unknown, …, or a verifier floor that cannot be read or
// written): nothing ran and nothing was recorded. Err is the refusal;
// errors.As and refusal.CodeOf see through to it. A zero (or nil)
// VerifyError, which Run never returns, says that no verification was
// given rather than panic.
type VerifyError struct {
	Err error
}

func (e *VerifyError) Error() string {
	if e == nil || e.Err == nil {
		return "pinned: a verification refused, with no refusal given"
	}
	return e.Err.Error()
}

func (e *VerifyError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Run runs req on the provider's accepted pin in its local env, as
// `cruxprov run` does: the store held shared (lo.Home) from before the
// pin is read to the run's end, the pin and env verified, the call built
// by Call, run by invoke.Subprocess. It returns what the executor's Run
// returns: a Result (with an error: the run happened and its outcome
// could not be written), or a refusal when nothing ran (an
// *invoke.RecordedRefusal when the ledger records it: a verification
// that refused once the pin named the env, such as env_drift, is one).
// A verification refused before that is a *VerifyError (a nil reg is
// one: registry_corrupt); a wait for the store's lock that ctx ended is a
// *store.WaitError wrapping ctx's error; a verification that ctx ended is
// ctx's error, recorded nowhere.
//
// The caller's timeout (req.Limits.TimeoutMS) bounds the wait for the
// store's lock too, on its own: a run that cannot take the store within
// it (a gc holds it, or waits for it behind a long run) gives up, runs
// nothing and records nothing, with a *store.WaitError wrapping
// context.DeadlineExceeded that says so; once the store is held, the
// provider has its whole budget. Without it the wait was unbounded, and
// `cruxprov run --timeout 5s` behind a gc --wait waited for ever. Without
// a caller's timeout the wait is not bounded (the manifest's budget is
// known only once the pin is read, under the lock).
func Run(ctx context.Context, reg registry.Reader, req Request, lo Local) (*invoke.Result, error) {
	hold, cancel := ctx, context.CancelFunc(func() {})
	bound := time.Duration(req.Limits.TimeoutMS) * time.Millisecond
	if bound > 0 {
		hold, cancel = context.WithTimeout(ctx, bound)
	}
	unlock, err := HoldStore(hold, lo.Home, lo.OnWait)
	cancel() // the lock, once held, does not depend on it
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w (the run's timeout, %s, bounds that wait as it bounds the provider); the provider did not run and nothing was written to the ledger: run it again once they are done", err, bound)
		}
		return nil, err
	}
	defer unlock()
	vo := req.Verify
	vo.Entrypoint = req.Entrypoint
	if vo.Store == "" {
		vo.Store = lo.Home // the env must be in the store held
	}
	rep, verr := verify.Verify(ctx, reg, req.Provider, vo)
	call := Call(rep, req)
	if call == nil {
		if ctx.Err() != nil && errors.Is(verr, ctx.Err()) {
			// The caller's context ended the verification: ctx's error,
			// no refusal, as when it ends the wait for the store or the
			// verify hook. It was a *VerifyError, which an executor
			// reads as a refusal at the pin.
			return nil, verr
		}
		if verr == nil {
			// Verified, with no entrypoint to run: req named none.
			// It returned a *VerifyError whose Err was nil.
			verr = NoCall(rep, req)
		}
		return nil, &VerifyError{Err: verr}
	}
	if req.OnPin != nil {
		req.OnPin(rep.Spec)
	}
	// The verification's outcome is the executor's first step: a refusal
	// found after the pin named the env is recorded like any outcome.
	call.Verify = func(context.Context) error { return verr }
	ex := lo.Executor
	if lo.Bwrap {
		b, err := Bwrap(rep) // the call names the seal: not refused
		if err != nil {
			return nil, &VerifyError{Err: err}
		}
		ex.Sandbox = b
	}
	return ex.Run(ctx, call)
}

// Call is the invoke.Call of req on the pin and env rep verified: what
// the pin names (entrypoint, digests, platform, env, its interpreter
// link), the manifest's budgets, secrets and egress, the runtime in the
// env's sealed resolution (Call.Runtime, which picks the protocol
// channel's wiring: from python.HandoffVersion on, start-up code in the
// env cannot write the result), and req's limits, input, key, resolver
// and environment. The entrypoint is req's, as the pin has it, whichever
// one rep was verified with (or none): one verification serves every
// entrypoint of the provider. Its Verify is left nil: Run sets the
// verification's outcome there; an executor that verified earlier and
// watches (package watch) sets its check. Build it from the report
// verified last, before every run. nil when rep does not name what would
// run (a verification refused before the pin named the env's seal) or
// the pin has no entrypoint req.Entrypoint.
func Call(rep *verify.Report, req Request) *invoke.Call {
	if rep == nil || rep.Spec == nil || rep.Seal == nil || rep.Seal.Seal == nil {
		return nil
	}
	c := CallOn(rep.Spec, rep.Entrypoint, rep.Materialization, req)
	if c == nil {
		return nil
	}
	c.Env, c.Python, c.SealDigest = rep.Env, rep.Seal.Seal.Env.Python, rep.Materialization.Seal
	c.Runtime = python.RuntimeOf(rep.Seal.Seal.Resolution.Packages)
	return c
}

// NoCall is nil when Call(rep, req) builds a call, and otherwise the
// refusal that says why it is nil, as the verification would have said
// it: rep.SealErr's for a report that names no seal (nil, or refused
// before it read it); entrypoint_unknown for an entrypoint the pin does
// not have (or none named), naming those it has, with the remedy that
// names one. An executor that builds its calls from a report it verified
// earlier (package watch) returns it for a nil call, whose own refusal
// ("there is no call to run") names neither.
func NoCall(rep *verify.Report, req Request) error {
	if err := rep.SealErr(); err != nil {
		return err
	}
	if rep.Spec == nil {
		return refusal.New(refusal.PinUnapproved, "the verification of %s names no accepted pin: verify the pin again", rep.Provider)
	}
	if Call(rep, req) == nil {
		return verify.UnknownEntrypoint(rep.Spec, req.Provider, rep.Revision, req.Entrypoint)
	}
	return nil
}

// CallOn is the part of a call every backend makes alike of an accepted
// pin: what spec's entrypoint req.Entrypoint and materialization m name,
// the manifest's budgets, secrets and egress, and req's limits, input,
// key, resolver and environment. e is that entrypoint when the caller
// has it (the one a verification named); nil, or another one, and it is
// looked up in spec: a report verified with one entrypoint built a call
// of another with the first one's object and implementation digest, run
// and recorded under the other's name. nil when spec has no entrypoint
// req.Entrypoint. Call (and pinned/container's) add what the backend
// runs: the env and its runtime, or the image. nil, too, for a nil spec
// (no accepted pin to run).
func CallOn(spec *registry.Provider, e *registry.Entrypoint, m registry.Materialization, req Request) *invoke.Call {
	if spec == nil {
		return nil
	}
	if e == nil || e.Name != req.Entrypoint {
		if e = spec.Entrypoint(req.Entrypoint); e == nil {
			return nil
		}
	}
	return &invoke.Call{
		Provider: req.Provider, Entrypoint: req.Entrypoint, Object: e.Object,
		ImplementationDigest: e.ImplementationDigest, MaterializationDigest: m.Digest, Platform: m.Platform,
		Budgets: invoke.Budgets{TimeoutMS: spec.Budgets["timeout_ms"], OutputBytes: spec.Budgets["output_bytes"]},
		Limits:  req.Limits,
		Secrets: spec.Secrets, Egress: spec.Egress, Input: req.Input, IdempotencyKey: req.IdempotencyKey,
		Resolve: req.Resolve, Environ: req.Environ, Allow: req.Allow,
	}
}

// Bwrap is the bubblewrap preset for the env rep verified: the env and
// what its sealed interpreter needs (its real path, stdlib, libpython
// and loader), as invoke.BwrapFor gives them. A report that names no
// seal (nil, a verification refused before it read the seal, or an env
// whose seal is missing or cannot be read) is refused at once, as
// rep.SealErr says: seal_missing or seal_invalid with what to do (the
// env rebuilt from the pin's inputs, read access given). It gave the
// zero invoke.Bwrap, which shows a run the env alone and no interpreter,
// and said nothing: the refusal came later, from the nil call, that there
// was no entrypoint to run.
func Bwrap(rep *verify.Report) (invoke.Bwrap, error) {
	if err := rep.SealErr(); err != nil {
		return invoke.Bwrap{}, err
	}
	in := rep.Seal.Seal.Interpreter
	var lib string
	if in.LibPython != nil {
		lib = in.LibPython.Path
	}
	return invoke.BwrapFor("", in.Path, in.Version, lib), nil
}

// HoldStore takes the lock of the store at home shared (store.md,
// "Locking"), as every reader of an env holds it, so that gc --envs
// (which takes it exclusive) does not remove an env while it is read or
// run; the returned func releases it. onWait (nil: none) is told when the
// lock has to wait. A store that is not there, or whose lock this user
// may not take (an operator's umask), is used without it, as the
// registry is read without its lock then: the verification refuses what
// is missing, and the lock only keeps gc away. A wait that ctx ends is
// ctx's error, wrapped. home "": no lock.
func HoldStore(ctx context.Context, home string, onWait func(store.Wait, []int)) (func(), error) {
	if home == "" {
		return func() {}, nil
	}
	st, err := store.OpenExisting(home)
	if err != nil {
		return func() {}, nil
	}
	if onWait != nil {
		st.OnWait(onWait)
	}
	unlock, err := st.LockShared(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return func() {}, nil
	}
	return unlock, nil
}

package watch

import (
	"context"
	"sync"

	"github.com/cruxible/cruxprov/refusal"
)

// Spec is what a Verifier watches.
type Spec struct {
	// Env is the sealed env's directory (envs/<hex>); a symlink to one is
	// followed. Its seal and stat index are watched with it.
	Env string
	// Interpreter and LibPython are watched besides the paths the env's
	// seal names (which are always watched); "" adds none.
	Interpreter, LibPython string
	// Extra are more paths whose change makes the next check a full one:
	// the registry directory, say. "" entries are skipped. None of them
	// may be written by the verify function itself, or every check would
	// be a full one.
	Extra []string
}

// Verifier runs a full verify function only when what it watches may have
// changed since the last full verify that passed. It is safe for
// concurrent use; checks are serialized.
type Verifier struct {
	spec   Spec
	verify func(context.Context) error

	mu     sync.Mutex
	w      *watcher // nil: nothing armed
	clean  bool     // the last full verify passed and nothing happened since
	armErr error    // why the last arm could not place every watch
	closed bool
	full   int64
}

// NewVerifier returns a Verifier of spec around verify, the full verify
// (seal.Verify of spec.Env, or the pin-level verify). Nothing is watched
// until the first Verify.
func NewVerifier(spec Spec, verify func(ctx context.Context) error) *Verifier {
	return &Verifier{spec: spec, verify: verify}
}

// ErrNoVerify is what Verify returns, having verified nothing, for a
// Verifier made without a verify function (NewVerifier's verify nil) or
// a nil *Verifier: a caller's mistake, not a drift of anything. It is a
// refusal, invoke_failed (refusal.CodeOf), whose words say that nothing
// was verified and what to give the Verifier; an invoke.Call whose Verify
// returns it is refused so and recorded so, never env_drift (it was: the
// ledger said the env had drifted where nobody had looked at it). Test
// for it with errors.Is: another invoke_failed refusal is not it.
var ErrNoVerify error = noVerify{}

// noVerify is ErrNoVerify: comparable, so that errors.Is finds it by
// value, and wrapping a fresh refusal, so that its code is found without
// making every invoke_failed refusal ErrNoVerify (refusal.Error's Is
// matches any refusal of its code).
type noVerify struct{}

func (noVerify) asRefusal() *refusal.Error {
	return refusal.New(refusal.InvokeFailed, "nothing was verified: the watch.Verifier has no verify function (NewVerifier was given none, or the Verifier is nil); make the Verifier with the full verify (the pin-level verify, or the env's seal verify) and run again")
}

func (e noVerify) Error() string { return e.asRefusal().Error() }

func (e noVerify) Unwrap() error { return e.asRefusal() }

// Verify returns nil at once when nothing watched changed since the last
// full verify that passed. Otherwise it places every watch afresh, then
// runs the full verify and returns its error; the Verifier stays dirty
// after a failed verify, after an event during it, and when a watch could
// not be placed, so the next call verifies fully again. After Close every
// call verifies fully. A Verifier without a verify function (or a nil
// one) returns ErrNoVerify, the refusal invoke_failed.
func (v *Verifier) Verify(ctx context.Context) error {
	if v == nil || v.verify == nil {
		return ErrNoVerify
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		v.full++
		return v.verify(ctx)
	}
	if v.clean && v.w != nil && !v.w.changed() {
		return nil
	}
	v.clean = false
	if err := ctx.Err(); err != nil {
		return err
	}
	if v.w != nil {
		v.w.close()
		v.w = nil
	}
	w, err := arm(ctx, v.spec)
	if err != nil {
		if w != nil {
			w.close()
			w = nil
		}
		v.armErr = err
	} else {
		v.armErr = nil
	}
	v.w = w
	v.full++
	if err := v.verify(ctx); err != nil {
		return err
	}
	v.clean = v.w != nil && !v.w.changed()
	return nil
}

// WatchErr says why the last full verify could not place every watch (the
// Verifier then verifies fully on every call until one can); nil when it
// is watching or has not armed yet (or v is nil).
func (v *Verifier) WatchErr() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.armErr
}

// FullVerifies counts the calls that ran the full verify function (0
// for a nil Verifier).
func (v *Verifier) FullVerifies() int64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.full
}

// Close removes every watch and releases the inotify descriptor. Verify
// still works after Close, verifying fully on every call. Close of a nil
// Verifier is a no-op that returns nil, as io.Closer users expect.
func (v *Verifier) Close() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed, v.clean = true, false
	if v.w != nil {
		v.w.close()
		v.w = nil
	}
	return nil
}

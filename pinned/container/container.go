// Package container is package pinned for a container materialization
// (`cruxprov run --backend container`): the accepted pin and its image
// verified (verify/container), the invoke.Call built from the verified
// report (Call: the image by digest, the runtime its signed provenance
// names), run by podman.Executor, the verification's outcome its first
// step.
//
// It is apart from pinned because it reaches the image code and podman:
// an executor that runs local envs imports pinned alone. It never prints
// and never reads the environment (podman's own, its registry
// credentials included, is the caller's to pass in Options.Executor).
//
// Linux only, as package pinned.
package container

import (
	"context"
	"errors"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/podman"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
	vcontainer "github.com/cruxible/cruxprov/verify/container"
)

// Options is how Run runs a container.
type Options struct {
	// Verify tunes the image's verification beyond req.Verify.
	Verify vcontainer.Options
	// Executor is the podman executor's settings: its Ledger, SecretMode,
	// UnenforcedLimits, Environ (podman's own: PATH and the registry
	// credentials it pulls with), ….
	Executor podman.Executor
}

// Run runs req on the provider's accepted pin in its container
// materialization, as `cruxprov run --backend container` does. Its
// results and errors are pinned.Run's (a verification refused before
// the pin named the image is a *pinned.VerifyError). No store lock is
// taken: a container run reads no env.
func Run(ctx context.Context, reg registry.Reader, req pinned.Request, o Options) (*invoke.Result, error) {
	vo := req.Verify
	vo.Entrypoint = req.Entrypoint
	rep, verr := vcontainer.Verify(ctx, reg, req.Provider, vo, o.Verify)
	call := Call(rep, req)
	if call == nil {
		if ctx.Err() != nil && errors.Is(verr, ctx.Err()) {
			// The caller's context ended the verification: ctx's error,
			// no refusal, as when it ends the wait for the store or the
			// verify hook. It was a *VerifyError, which an executor
			// reads as a refusal at the pin.
			return nil, verr
		}
		if verr == nil && rep.Entrypoint == nil { // verified, with no entrypoint to run (pinned.Run)
			verr = verify.NoEntrypoint(rep.Spec, req.Provider, rep.Revision)
		}
		return nil, &pinned.VerifyError{Err: verr}
	}
	if req.OnPin != nil {
		req.OnPin(rep.Spec)
	}
	if verr == nil && call.Runtime == "" {
		// The image's verified provenance lists every package of its
		// env, and none is the runtime: the env has no harness module.
		// Refused before anything is spawned, as a local env without it
		// is (DESIGN §10); it was spawned, and recorded as the
		// provider's failure (harness_exited, exit 1).
		verr = refusal.New(refusal.RuntimeMissing, "the image %s holds no %s module: its signed provenance names no %s among the packages of its env; add that wheel to the provider's lock, embed the lock in the provider's wheel again, build its image and install it (docs/provider-authors.md)",
			call.Image, python.HarnessModule, pep503.Normalize(python.RuntimeDistribution))
	}
	call.Verify = func(context.Context) error { return verr }
	ex := o.Executor
	return ex.Run(ctx, call)
}

// Call is the invoke.Call of req on the pin and image rep verified: as
// pinned.CallOn, with the image by digest and the runtime its verified
// provenance names (Call.Runtime), and req's entrypoint (pinned.Call).
// Its Verify is left nil (pinned.Call). nil when rep does not name what
// would run.
func Call(rep *vcontainer.Report, req pinned.Request) *invoke.Call {
	if rep == nil || rep.Spec == nil || rep.Materialization.Image == "" {
		return nil
	}
	c := pinned.CallOn(rep.Spec, rep.Entrypoint, rep.Materialization, req)
	if c == nil {
		return nil
	}
	c.Image = rep.Materialization.Image
	c.Runtime = rep.Runtime()
	return c
}

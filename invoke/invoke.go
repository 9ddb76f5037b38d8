package invoke

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/receipts"
)

// Executor runs one call. Run returns a Result for every run that was
// spawned or replayed, whatever its status; a refusal (verify, the
// runtime, secrets, the ledger) is a *refusal.Error with a nil Result.
type Executor interface {
	Run(ctx context.Context, c *Call) (*Result, error)
}

// Ledger is where every dispatch is recorded, two-phase: Begin before the
// spawn (it may refuse idempotency_conflict or return a replayed outcome),
// Finish after. *receipts.Ledger implements it.
type Ledger interface {
	Begin(ctx context.Context, in receipts.Intent) (receipts.Decision, error)
	Finish(ctx context.Context, out receipts.Outcome) error
}

// SecretResolver returns the value of one secret ref. It is called for
// every ref the manifest declares, afresh on every Run; any error refuses
// the run secret_unresolved, except a refusal secret_bundle_too_large (a
// value the resolver knows cannot fit the bundle), which is kept.
type SecretResolver func(ctx context.Context, ref string) (string, error)

// Budgets are a run's limits; 0 is unset.
type Budgets struct {
	// TimeoutMS is the wall-clock limit in milliseconds.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// OutputBytes bounds stdout and stderr together.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// Call is one invocation: which env and entrypoint, what the manifest
// allows, and what the caller gives.
type Call struct {
	// Env is the sealed env's directory; Python is its interpreter link
	// relative to Env, as the seal names it (seal.Env.Python, "bin/python").
	Env, Python string
	// Image is the container image a container executor runs (package
	// podman), pinned by digest: REF@sha256:… or oci:DIR@sha256:…; Env and
	// Python are then unused.
	Image string
	// Runtime is the version of the runtime (cruxible-provider-runtime)
	// in the env or image, as its verified seal's resolution (an image's
	// provenance) names it. It picks how the protocol channel reaches the
	// harness (python.Handoff): from python.HandoffVersion on, on a
	// descriptor of its own that python.ProtocolFDVar names, with fd 1 on
	// stderr from the interpreter's start, so that the env's start-up code
	// cannot write the result; before it, on fd 1. "" (not known): the
	// subprocess executor reads it from the env's installed dist-info
	// (cruxible_provider_runtime-VERSION.dist-info beside the harness); a
	// container executor cannot look inside the image and takes "" as
	// before python.HandoffVersion. The argv is python -I -m either way
	// (python.Harness).
	Runtime string
	// Provider, Entrypoint and Object (module:attr) name what runs.
	Provider, Entrypoint, Object string
	// ImplementationDigest, MaterializationDigest and SealDigest (the seal
	// content digest) and Platform are recorded in the receipt.
	ImplementationDigest, MaterializationDigest, SealDigest digest.Digest
	Platform                                                string
	// Budgets are the manifest's (ceilings); Limits are the caller's,
	// which may lower them, never raise them.
	Budgets, Limits Budgets
	// Secrets are the refs the manifest declares: each is resolved by
	// Resolve and delivered, none other.
	Secrets []string
	// Egress is the manifest's declared egress.
	Egress []string
	// Input is the request's input, one JSON value (empty: null).
	Input json.RawMessage
	// IdempotencyKey, when set, makes a repeated call with the same input
	// replay a recorded ok outcome (DESIGN §10).
	IdempotencyKey string
	// Resolve resolves secret refs (nil: no secret can be resolved, and a
	// call whose manifest declares one is refused secret_unresolved,
	// its detail saying that no resolver was given).
	Resolve SecretResolver
	// Environ is the environment to choose Allow from ("K=V" entries; cmd
	// passes os.Environ()). Only the names in Allow pass; Inject ("K=V")
	// is added after them and wins. Nothing else reaches the child but
	// the executor's own (Subprocess: TMPDIR, the run's workdir, when
	// neither names it).
	Environ, Allow, Inject []string
	// Verify, when set, is called first; any error refuses the run with
	// nothing spawned (the pin verify, or seal.Verify), but for ctx's
	// own once ctx has ended: Run returns it and records nothing.
	Verify func(ctx context.Context) error
}

// Status is how a run ended (the receipt's status).
type Status string

// The statuses of a Result.
const (
	StatusOK          Status = receipts.StatusOK
	StatusError       Status = receipts.StatusError
	StatusTimeout     Status = receipts.StatusTimeout
	StatusOutputLimit Status = receipts.StatusOutputLimit
)

// ResultCodes is the closed set of error codes a result from the harness
// may carry (DESIGN §10); a result with another is a protocol_error.
var ResultCodes = []string{"bad_request", "import_failed", "provider_error", "result_invalid", "secret_unavailable"}

// The error codes an executor gives (Result.Error.Code) besides the
// harness's own (ResultCodes).
const (
	// CodeProtocolError: the harness exited 0 but stdout, trimmed, was not
	// exactly one JSON result for this run; or provider code closed the
	// harness's result channel, so that it could write none (it exits 74).
	CodeProtocolError = "protocol_error"
	// CodeExited: the harness exited non-zero or was killed by a signal
	// without the executor asking (its stderr tail is in the receipt).
	CodeExited = "harness_exited"
	// CodeTimeout: the run was killed at its timeout.
	CodeTimeout = "timeout"
	// CodeOutputLimit: the run was killed when stdout and stderr spent
	// output_bytes.
	CodeOutputLimit = "output_limit"
	// CodeCancelled: the caller's context ended the run.
	CodeCancelled = "cancelled"
	// CodeShimRefused: a container's entry shim (cruxshim) refused before
	// it started the harness (exit 78, nothing on stdout, its one stderr
	// line "shim_refused: <code>" and nothing else: shim.ParseRefused);
	// the message names the shim's code. Not the provider's failure.
	CodeShimRefused = "shim_refused"
)

// Error is an error result: a code and a message (never a secret value).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Result is what a run gave.
type Result struct {
	// AttemptID is the receipt's attempt (also the protocol's run_id).
	AttemptID string `json:"attempt_id"`
	// Status is ok, error, timeout or output_limit.
	Status Status `json:"status"`
	// Value is the provider's result when Status is ok.
	Value json.RawMessage `json:"result,omitempty"`
	// Error says why when Status is not ok.
	Error *Error `json:"error,omitempty"`
	// Egress is the egress the provider recorded.
	Egress []string `json:"egress"`
	// ExitCode is the harness's exit status: 128+N when signal N killed it
	// (whichever process ran in front of it: the backends all report a
	// death by signal so, as shells and container runtimes do); -1 when
	// there was none (a container removed with its status).
	ExitCode int `json:"exit_code"`
	// StdoutBytes and StderrBytes are what the run wrote.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// Replayed is set when a recorded ok outcome was returned without
	// spawning.
	Replayed bool `json:"replayed,omitempty"`
	// ReplayOf is set on a replay: the earlier ok attempt whose outcome
	// it returned (the receipt's replay_of), whose receipt says what ran.
	ReplayOf string `json:"replay_of,omitempty"`
	// ResultDigest is set on a replay: the recorded result's digest
	// ("sha256:<hex>"). A ledger keeps no result values, so a replay has
	// no Value.
	ResultDigest string `json:"result_digest,omitempty"`
	// Budgets are the limits the run had.
	Budgets Budgets `json:"budgets"`
	// Duration is the spawn's wall clock.
	Duration time.Duration `json:"duration_ns"`
}

// Effective returns the budgets a run gets: for each, the smallest of the
// manifest's and the caller's that are set, else def's.
func Effective(manifest, caller, def Budgets) Budgets {
	pick := func(m, c, d int64) int64 {
		v := int64(0)
		for _, x := range []int64{m, c} {
			if x > 0 && (v == 0 || x < v) {
				v = x
			}
		}
		if v == 0 {
			v = d
		}
		return v
	}
	return Budgets{
		TimeoutMS:   pick(manifest.TimeoutMS, caller.TimeoutMS, def.TimeoutMS),
		OutputBytes: pick(manifest.OutputBytes, caller.OutputBytes, def.OutputBytes),
	}
}

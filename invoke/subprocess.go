package invoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/internal/strictjson"
	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/shim"
)

// MaxSecretBundle is the largest secret bundle delivered, in bytes.
const MaxSecretBundle = 64 << 10

// StderrTail is how much of the end of stderr a receipt keeps, in bytes.
const StderrTail = 4 << 10

// What a receipt keeps of a run's own words, so that its outcome always
// fits a ledger row (receipts.MaxRow; JSON may write a byte as six), and
// a provider cannot leave its run unrecorded by saying too much: the first
// ReceiptMessage bytes of the error message (and 128 of its code), and the
// first observed egress URLs (each cut to 2 KiB) while they add up to at
// most ReceiptEgress bytes; the outcome counts the URLs dropped. A cut
// text ends with " … (N bytes more)". The Result keeps them whole.
const (
	ReceiptMessage = 4 << 10
	ReceiptEgress  = 64 << 10
	receiptCode    = 128
	receiptURL     = 2 << 10
)

// Defaults applied where neither the manifest nor the caller sets a budget.
var DefaultBudgets = Budgets{TimeoutMS: 30_000, OutputBytes: 1 << 20}

// Subprocess is the local executor: it spawns the env's interpreter with
// the harness. The zero value is usable (no ledger, no sandbox).
type Subprocess struct {
	// Sandbox gives a launcher argv prepended to the interpreter's (Bwrap
	// is the bubblewrap preset, Launcher a fixed argv); nil: none.
	Sandbox Sandbox
	// Grace is how long a run has between SIGTERM and SIGKILL (0: DefaultGrace, 2s).
	Grace time.Duration
	// WorkdirParent is where each run's working directory is made
	// ("": /tmp). It must be writable by the executor.
	WorkdirParent string
	// Ledger records every dispatch (nil: nothing is recorded).
	Ledger Ledger
	// Defaults are the budgets where neither manifest nor caller sets one
	// (zero fields: DefaultBudgets').
	Defaults Budgets
	// NoNamespaces disables the user and pid namespaces: the run is then
	// contained by its process group and a walk of its descendants only
	// (docs/executor.md says what that misses). They are also skipped
	// where the kernel refuses them. Either way the run's receipt names
	// them among the limits it went without (LimitNamespaces).
	NoNamespaces bool
}

func (s *Subprocess) grace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return DefaultGrace
}

// LimitNamespaces is the name a local run's receipt gives its user and
// pid namespaces in receipts.Intent.Unenforced when it ran without them
// (Subprocess.NoNamespaces, or a kernel or seccomp filter that refuses
// them): contained then by its process group and a walk of its
// descendants only (docs/executor.md, "Limits").
const LimitNamespaces = "namespaces"

// LimitReadOnlyEnv is the name a local run's receipt gives, in
// receipts.Intent.Unenforced, the read-only view of its env a run started
// by root gets (roThread) when it ran without it: the kernel refused this
// executor a mount namespace (no CAP_SYS_ADMIN, as in a container). The
// run then went as before the view was made: root's writes into the env
// are the next call's verify's to refuse (env_drift). A run by any other
// user is kept out of its env by the env's modes, and never names it.
const LimitReadOnlyEnv = "readonly_env"

// Run implements Executor. A nil *Subprocess runs nothing and records
// nothing: it is refused invoke_failed (the zero Subprocess, not a nil
// pointer, is the executor without a ledger or sandbox).
func (s *Subprocess) Run(ctx context.Context, c *Call) (*Result, error) {
	if s == nil {
		return nil, refusal.New(refusal.InvokeFailed, "no executor to run the call (a nil *invoke.Subprocess): nothing ran; pass a Subprocess value")
	}
	// Whether the run gets its namespaces is decided before the intent is
	// written, so that the receipt says how the run was contained: a run
	// without them must not look, in the audit trail, like one with them.
	// Asking the kernel (once per process, ~5 ms) overlaps the Verify hook;
	// with no shell to ask with, the env's interpreter asks, once checked.
	allowed := make(chan bool, 1)
	probe := nsProbe()
	switch {
	case s.NoNamespaces:
		allowed <- false
	case probe != nil:
		go func() { allowed <- namespacesAllowed(probe) }()
	}
	var py string
	var ns, bytecode bool
	var ro *roThread
	defer func() {
		if ro != nil {
			ro.Release() // after spawn has waited for the run
		}
	}()
	st, replay, err := begin(ctx, c, "local", s.Ledger, s.Defaults, func() ([]string, error) {
		var err error
		var site string
		if py, site, bytecode, err = s.checkEnv(c); err != nil {
			return nil, err
		}
		var unenforced []string
		if os.Geteuid() == 0 {
			// Root's writes no mode of the env stops: the run gets a view
			// of it read-only, made before the intent so that the receipt
			// says whether it held. Where the kernel refuses it the run
			// goes as before (docs/executor.md).
			env, err := filepath.Abs(c.Env)
			if err != nil {
				return nil, refusal.Wrap(refusal.InvokeFailed, err, "the env path %s", c.Env)
			}
			if ro, err = readOnlyEnv(env); err != nil {
				unenforced = append(unenforced, LimitReadOnlyEnv)
			}
		}
		if c.Runtime == "" {
			// The env's own runtime picks the channel's wiring for a
			// caller that did not say (a Call built by hand; one that
			// did pays no directory read): the caller's Call is not
			// written to.
			if rt := installedRuntime(site); rt != "" {
				cc := *c
				cc.Runtime = rt
				c = &cc
			}
		}
		if probe == nil && !s.NoNamespaces {
			ns = namespacesAllowed([]string{py, "-I", "-S", "-c", ""})
		} else {
			ns = <-allowed
		}
		if !ns {
			unenforced = append([]string{LimitNamespaces}, unenforced...)
		}
		return unenforced, nil
	})
	if st == nil {
		return replay, err
	}
	res, tail, err := s.spawn(ctx, c, py, ns, bytecode, ro, st.attempt, st.input, st.budgets, st.bundle, st.red)
	if err != nil {
		return nil, st.rec.finishRefused(ctx, err)
	}
	if err := st.rec.finish(ctx, res, tail); err != nil {
		return res, err
	}
	return res, nil
}

// begun is a call both executors have taken through begin: ready to start
// its process.
type begun struct {
	input   json.RawMessage // compacted
	budgets Budgets
	attempt string
	rec     *recorder
	bundle  []byte // the secret bundle (nil: no secret)
	red     *redactor
}

// begin is what every executor does before it starts a run's process
// (DESIGN §10): compact the input, settle the budgets (the manifest's
// ceilings, lowered by the caller), run the Verify hook and check (any
// error refuses, recorded as refused with nothing spawned), write the
// intent (a recorded ok under the idempotency key is replayed: a nil
// *begun with the replayed Result), and resolve the secrets fresh. A nil
// *begun with a nil Result comes with the error.
func begin(ctx context.Context, c *Call, backend string, l Ledger, defaults Budgets, check func() ([]string, error)) (*begun, *Result, error) {
	if c == nil {
		// What a builder gives for a request it cannot name (pinned.Call
		// for an entrypoint the pin does not have): refused, not a panic
		// in an executor that stays up.
		return nil, nil, refusal.New(refusal.EntrypointUnknown, "there is no call to run (nil): nothing names the entrypoint; build it from a verified pin that has the entrypoint asked for")
	}
	input := c.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("null")
	}
	var in bytes.Buffer
	if err := json.Compact(&in, input); err != nil {
		return nil, nil, refusal.Wrap(refusal.InputInvalid, err, "the call's input is not one JSON value")
	}
	input = in.Bytes()
	if !utf8.Valid(input) {
		// Compact passes any bytes inside a string: the harness could not
		// decode the request, not even its run_id, and its answer would be
		// recorded as the harness's protocol_error.
		return nil, nil, refusal.New(refusal.InputInvalid, "the call's input is not valid UTF-8 (JSON text is UTF-8; escape binary data, as base64 say)")
	}
	if why := pythonCannotRead(input); why != "" {
		return nil, nil, refusal.New(refusal.InputInvalid, "the call's input has %s", why)
	}
	if key, ok := duplicateKey(input); ok {
		return nil, nil, refusal.New(refusal.InputInvalid, "the call's input has the key %q twice in one object: the harness reads JSON with no duplicate keys (which of the two counts differs between parsers)", key)
	}
	def := defaults
	if def.TimeoutMS <= 0 {
		def.TimeoutMS = DefaultBudgets.TimeoutMS
	}
	if def.OutputBytes <= 0 {
		def.OutputBytes = DefaultBudgets.OutputBytes
	}
	budgets := Effective(c.Budgets, c.Limits, def)
	attempt := newAttemptID()
	intent := receipts.Intent{
		AttemptID: attempt, IdempotencyKey: c.IdempotencyKey,
		Provider: c.Provider, Entrypoint: c.Entrypoint,
		ImplementationDigest: str(c.ImplementationDigest), MaterializationDigest: str(c.MaterializationDigest),
		SealDigest: str(c.SealDigest), Backend: backend, Platform: c.Platform,
		ProtocolVersion: buildinfo.ProtocolVersion, Tool: buildinfo.Tool(),
		InputDigest: digest.Sum(input).String(), StartedAt: time.Now().UTC(),
	}
	rec := &recorder{l: l, attempt: attempt, egress: c.Egress}
	// Verify first: any error refuses with nothing spawned.
	if c.Verify != nil {
		if err := c.Verify(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// The caller's context ended the verification (Ctrl-C
				// during `cruxprov run`'s verify): nothing drifted and
				// nothing ran, and nothing is recorded, as for a run
				// stopped while it waited for the store. It was recorded
				// refused env_drift, "verify refused the run: context
				// canceled", a drift that never was.
				return nil, nil, err
			}
			return nil, nil, rec.refuse(ctx, intent, asRefusal(err, refusal.EnvDrift, "verify refused the run"))
		}
	}
	unenforced, err := check()
	if err != nil {
		return nil, nil, rec.refuse(ctx, intent, err)
	}
	intent.Unenforced = unenforced
	if rec.l != nil {
		dec, err := rec.l.Begin(ctx, intent)
		if err != nil {
			return nil, nil, asRefusal(err, refusal.LedgerWriteFailed, "cannot write the intent")
		}
		rec.begun = true
		if dec.Replay != nil {
			return nil, replayed(dec.Replay, budgets), nil
		}
	}
	secrets, bundle, err := resolveSecrets(ctx, c)
	if err != nil {
		return nil, nil, rec.finishRefused(ctx, err)
	}
	return &begun{input: input, budgets: budgets, attempt: attempt, rec: rec, bundle: bundle, red: newRedactor(secrets)}, nil, nil
}

func str(d digest.Digest) string {
	if d.IsZero() {
		return ""
	}
	return d.String()
}

func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "att_" + hex.EncodeToString(b[:])
}

func asRefusal(err error, code refusal.Code, detail string) error {
	var r *refusal.Error
	if errors.As(err, &r) {
		return err
	}
	return refusal.Wrap(code, err, "%s", detail)
}

// checkEnv returns the interpreter's path, the site-packages directory
// the harness module is in and whether the env holds bytecode, refusing a
// link that leaves the env and an env without the harness module
// (runtime_missing). An env holds bytecode when the runtime's package has
// its __pycache__: a create compiles every module of every wheel or none
// (--no-compile), and a __pycache__ added since is drift the Verify hook
// has refused by now.
func (s *Subprocess) checkEnv(c *Call) (py, site string, bytecode bool, err error) {
	rel := filepath.Clean(filepath.FromSlash(c.Python))
	if c.Env == "" || c.Python == "" || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", false, refusal.New(refusal.SealInvalid, "the env's python link %q is not a path inside the env", c.Python)
	}
	if c.Object == "" || c.Entrypoint == "" {
		return "", "", false, refusal.New(refusal.EntrypointUnknown, "the call names no entrypoint or object")
	}
	mod := strings.ReplaceAll(python.HarnessModule, ".", "/") + ".py"
	found, _ := filepath.Glob(filepath.Join(c.Env, "lib", "python*", "site-packages", mod))
	if len(found) == 0 {
		found, _ = filepath.Glob(filepath.Join(c.Env, "Lib", "site-packages", mod))
	}
	if len(found) == 0 {
		return "", "", false, refusal.New(refusal.RuntimeMissing, "the env %s has no %s module, which the provider runtime's wheel (%s) installs: add that wheel to the provider's lock, embed the lock in the provider's wheel again and install the new wheel (docs/provider-authors.md)", c.Env, python.HarnessModule, pep503.Normalize(python.RuntimeDistribution))
	}
	env, err := filepath.Abs(c.Env)
	if err != nil {
		return "", "", false, refusal.Wrap(refusal.InvokeFailed, err, "the env path %s", c.Env)
	}
	_, err = os.Lstat(filepath.Join(filepath.Dir(found[0]), "__pycache__"))
	return filepath.Join(env, rel), filepath.Dir(filepath.Dir(found[0])), err == nil, nil
}

// installedRuntime is the version of the runtime whose dist-info is in
// the site-packages directory site (name-version.dist-info, as every
// installer names it), "" when there is not exactly one.
func installedRuntime(site string) string {
	found, _ := filepath.Glob(filepath.Join(site, python.RuntimeDistribution+"-*.dist-info"))
	if len(found) != 1 {
		return ""
	}
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(found[0]), python.RuntimeDistribution+"-"), ".dist-info")
	if strings.Contains(v, "-") {
		return ""
	}
	return v
}

// resolveSecrets resolves every declared ref and builds the bundle: a JSON
// object with sorted keys, at most MaxSecretBundle bytes.
func resolveSecrets(ctx context.Context, c *Call) ([]string, []byte, error) {
	ch := shim.SecretChannel(c.Secrets)
	if ch == nil {
		return nil, nil, nil
	}
	m := make(map[string]string, len(ch.Refs))
	values := make([]string, 0, len(ch.Refs))
	for _, ref := range ch.Refs {
		if c.Resolve == nil {
			// A Go caller's omission (cmd/ always passes a resolver): the
			// detail says what to pass; no operator remedy fits it.
			return nil, nil, refusal.New(refusal.SecretUnresolved, "secret %q has no value: the manifest declares it and the call has no secret resolver (Call.Resolve, set from pinned.Request.Resolve, is nil); pass one that resolves it", ref)
		}
		v, err := c.Resolve(ctx, ref)
		if code := refusal.CodeOf(err); code == refusal.SecretUnresolved || code == refusal.SecretBundleTooLarge {
			return nil, nil, err // the resolver said which and why (a value that cannot fit the bundle)
		}
		if err != nil {
			// The resolver's own error (a Go executor's: cmd/'s resolver
			// refuses in its own words), then what the run needs.
			return nil, nil, refusal.Wrap(refusal.SecretUnresolved, err, "secret %q has no value: %v; the manifest declares it, so the run needs the resolver to give its value", ref, err)
		}
		if !utf8.ValidString(v) {
			return nil, nil, refusal.New(refusal.SecretUnresolved, "secret %q is not valid UTF-8 text (the bundle on fd 3 is JSON text): have the resolver give it as text, binary data encoded (as base64 say)", ref)
		}
		m[ref] = v
		values = append(values, v)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil { // map keys are sorted
		return nil, nil, refusal.Wrap(refusal.SecretUnresolved, err, "cannot encode the secret bundle")
	}
	bundle := bytes.TrimRight(b.Bytes(), "\n")
	if len(bundle) > MaxSecretBundle {
		return nil, nil, refusal.New(refusal.SecretBundleTooLarge, "the secret bundle is %d bytes, over the %d bytes it may hold: give the provider smaller or fewer secret values", len(bundle), MaxSecretBundle)
	}
	return values, bundle, nil
}

// ProtocolFD is the descriptor on which the subprocess executor hands a
// runtime from python.HandoffVersion on its protocol channel, named by
// python.ProtocolFDVar (shim.ProtocolFD): the one after the secret
// bundle's (shim.SecretFD, not opened when the run has no secrets).
const ProtocolFD = shim.ProtocolFD

// environ builds the child's environment: the allowed names from Environ,
// then Inject, then set (the executor's own NAME=VALUE entries); a later
// entry of a name replaces an earlier one.
func environ(c *Call, set ...string) []string {
	allow := map[string]bool{}
	for _, a := range c.Allow {
		allow[a] = true
	}
	var out []string
	seen := map[string]int{}
	add := func(kv string) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return
		}
		if i, ok := seen[k]; ok {
			out[i] = kv
			return
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range c.Environ {
		if k, _, ok := strings.Cut(kv, "="); ok && allow[k] {
			add(kv)
		}
	}
	for _, kv := range c.Inject {
		add(kv)
	}
	for _, kv := range set {
		add(kv)
	}
	if out == nil {
		out = []string{} // nil would mean "inherit" to os/exec
	}
	return out
}

// maxTmpdir is the longest workdir path given as TMPDIR: a Unix socket's
// path holds at most 107 bytes, and multiprocessing's forkserver makes
// one at TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (32 more).
const maxTmpdir = 107 - 32

// runTmpdir is the TMPDIR=work entry a run gets when its environment names
// no TMPDIR (the caller allowed or injected none) and work is short enough
// for a socket under it: the provider's temporary files go into its own
// workdir, removed with it, not into the host's shared /tmp, where they
// outlived the run (a sandbox that shows no /tmp made Python's tempfile
// fall back to the working directory anyway). "" otherwise.
func runTmpdir(work string, env []string) string {
	if len(work) > maxTmpdir {
		return ""
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "TMPDIR=") {
			return ""
		}
	}
	return "TMPDIR=" + work
}

type request struct {
	ProtocolVersion int             `json:"protocol_version"`
	RunID           string          `json:"run_id"`
	Entrypoint      string          `json:"entrypoint"`
	Object          string          `json:"object"`
	Input           json.RawMessage `json:"input"`
	SecretChannel   *shim.Channel   `json:"secret_channel"`
	Budgets         Budgets         `json:"budgets"`
	EgressDeclared  []string        `json:"egress_declared"`
	IdempotencyKey  *string         `json:"idempotency_key"`
}

// Request returns the protocol line (newline-terminated) a call sends the
// harness as run runID, for tools that spawn the harness themselves (the
// bare-spawn benchmark).
func Request(c *Call, runID string, b Budgets) ([]byte, error) {
	r := request{
		ProtocolVersion: buildinfo.ProtocolVersion, RunID: runID, Entrypoint: c.Entrypoint, Object: c.Object,
		Input: c.Input, SecretChannel: shim.SecretChannel(c.Secrets), Budgets: b, EgressDeclared: c.Egress,
	}
	if len(bytes.TrimSpace(r.Input)) == 0 {
		r.Input = json.RawMessage("null")
	}
	if r.EgressDeclared == nil {
		r.EgressDeclared = []string{}
	}
	if c.IdempotencyKey != "" {
		k := c.IdempotencyKey
		r.IdempotencyKey = &k
	}
	line, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// meter bills stdout and stderr against one budget.
type meter struct {
	budget int64
	used   atomic.Int64
	once   sync.Once
	spent  chan struct{}
}

func (m *meter) bill(n int) bool {
	if m.used.Add(int64(n)) > m.budget {
		m.once.Do(func() { close(m.spent) })
		return false
	}
	return true
}

// sink is one stream: it counts, bills, and keeps what it may.
type sink struct {
	m       *meter
	mu      sync.Mutex
	n       int64
	buf     []byte // stdout: everything within budget; stderr: a tail
	limit   int    // keep at most the last limit bytes (0: keep all)
	dropped int64  // bytes dropped from the front of buf
	over    bool   // the budget is spent: every write is refused (errOutputSpent), so the copy from the pipe stops
	// hold is closed once the run is killed: the write that is refused
	// waits for it first, so the pipe is neither read nor closed while
	// the kill is on its way (nil: no wait).
	hold <-chan struct{}
}

// errOutputSpent is a sink's answer once the output budget is spent: the copy from the run's pipe stops there, and
// os/exec closes the pipe's read end, so the run's next write fails
// (EPIPE) while its kill lands. The local executor's sinks drained the
// pipes on, discarding, and a flood went on at the pipe's speed until the
// SIGKILL came: 2 MB against a budget of 1 MiB ran to its end (exit 0) in
// half the runs (TestOutputLimitStopsReading). A Backend's sinks
// (Dispatch) stop too, and hold the refused write until the run is
// killed: podman hands the container the pipes themselves (--log-driver
// passthrough), so the container's next write blocks where the budget was
// spent until the SIGKILL lands. Its kill takes podman a few hundred
// milliseconds, in which a write that failed at once let the harness
// write its error result and exit 0 before the kill (recorded output_limit
// with that exit code); and a relay, the attached podman client, no
// longer read blocked conmon and with it the kill
// (TestOutputLimitStopsTheContainer in package podman).
var errOutputSpent = errors.New("the output budget is spent")

func (s *sink) Write(p []byte) (int, error) {
	n, err := s.write(p)
	if err != nil && s.hold != nil {
		<-s.hold
	}
	return n, err
}

func (s *sink) write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += int64(len(p))
	if s.over {
		return len(p), errOutputSpent
	}
	keep := p
	if !s.m.bill(len(p)) {
		// Keep only what fits the budget (the run is being killed);
		// nothing more is read.
		rest := s.m.budget - (s.m.used.Load() - int64(len(p)))
		if rest < 0 {
			rest = 0
		}
		if rest < int64(len(keep)) {
			keep = keep[:rest]
		}
		s.over = true
	}
	s.buf = append(s.buf, keep...)
	if s.limit > 0 && len(s.buf) > 2*s.limit {
		s.dropped += int64(len(s.buf) - s.limit)
		s.buf = append(s.buf[:0], s.buf[len(s.buf)-s.limit:]...)
	}
	if s.over {
		return len(p), errOutputSpent
	}
	return len(p), nil
}

// tail is the last n bytes kept, and whether the stream wrote any byte
// before them (the window is cut at its start).
func (s *sink) tail(n int) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	cut := s.dropped > 0
	if len(b) > n {
		b, cut = b[len(b)-n:], true
	}
	return append([]byte(nil), b...), cut
}

func (s *sink) bytes() ([]byte, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	if s.limit > 0 && len(b) > s.limit {
		b = b[len(b)-s.limit:]
	}
	return append([]byte(nil), b...), s.n
}

func (s *Subprocess) spawn(ctx context.Context, c *Call, py string, ns, bytecode bool, ro *roThread, attempt string, input []byte, b Budgets, bundle []byte, red *redactor) (*Result, string, error) {
	call := *c
	call.Input = input
	line, err := Request(&call, attempt, b)
	if err != nil {
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot encode the request")
	}
	parent := s.WorkdirParent
	if parent == "" {
		parent = "/tmp"
	}
	// Beside the run, not before it (a busy /tmp takes milliseconds to
	// list); done before the run returns.
	swept := make(chan struct{})
	go func() { sweepWorkdirs(parent); close(swept) }()
	defer func() { <-swept }()
	work, err := os.MkdirTemp(parent, workdirPrefix)
	if err != nil {
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the run's working directory in %s: the executor needs a directory it can write there (TMPDIR for the command line, WorkdirParent in Go)", parent)
	}
	defer removeAll(work)
	if err := os.Chmod(work, 0o700); err != nil {
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the run's working directory private")
	}
	// Held for the run (close-on-exec: the provider does not get it), so
	// that a later run can tell this directory from one an executor killed
	// mid-run left behind (sweepWorkdirs).
	if held, err := os.Open(work); err == nil {
		if syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			defer held.Close()
		} else {
			held.Close()
		}
	}

	var argv []string
	if s.Sandbox != nil {
		if argv, err = s.Sandbox.Argv(c, work); err != nil {
			return nil, "", typed(err, "the sandbox")
		}
	}
	if bytecode {
		argv = append(argv, python.Harness(py)...)
	} else {
		// An env without bytecode is compiled in memory on every run; a
		// run as root (whose writes no 0555 directory stops) wrote the
		// compiled modules into the sealed env, which the next run's
		// verify refused as drift.
		argv = append(argv, python.HarnessNoBytecode(py)...)
	}
	m := &meter{budget: b.OutputBytes, spent: make(chan struct{})}
	stdout := &sink{m: m}
	stderr := &sink{m: m, limit: StderrTail + 4096}

	// A runtime that takes the channel from python.ProtocolFDVar gets it
	// on ProtocolFD, and fd 1 is the stderr pipe from the interpreter's
	// start: start-up code (a .pth file, sitecustomize) that prints
	// writes stderr, billed as before. Older runtimes: fd 1 is the channel.
	handoff := python.Handoff(c.Runtime)
	var chanR, chanW *os.File
	if handoff {
		if chanR, chanW, err = os.Pipe(); err != nil {
			return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the protocol channel's pipe")
		}
		defer chanR.Close()
		defer chanW.Close()
	}

	// The run's stdout and stderr are pipes the executor reads itself (not
	// os/exec), so that it knows whether it read them to their end: one
	// still held open at the grace fails the run (heldFailure).
	var outs outputs
	defer outs.close()
	var outW, errW *os.File
	if handoff {
		// One pipe, and one sink, for fd 1 and fd 2.
		outs.add("the result channel", chanR, stdout)
		if outW, err = outs.pipe("stdout and stderr", stderr); err != nil {
			return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the run's output pipe")
		}
		errW = outW
	} else {
		if outW, err = outs.pipe("stdout", stdout); err == nil {
			errW, err = outs.pipe("stderr", stderr)
		}
		if err != nil {
			return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the run's output pipes")
		}
	}
	defer outW.Close()
	defer errW.Close()

	var secretR, secretW *os.File
	if bundle != nil {
		if secretR, secretW, err = os.Pipe(); err != nil {
			return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot make the secret pipe")
		}
		defer secretR.Close()
		defer secretW.Close()
	}
	// How the run's pid namespace begins: with the init shell in front of
	// the harness (withInit), or, where there is no shell, with the
	// harness itself until it forks its own init.
	var initFront, harnessFirst bool
	build := func(ns bool) *exec.Cmd {
		var set []string
		if handoff {
			set = append(set, python.ProtocolFDVar+"="+strconv.Itoa(ProtocolFD))
		}
		if !bytecode {
			// -B is the harness's; a Python subprocess the provider starts
			// (sys.executable -m …) reads it here, unless it is isolated.
			set = append(set, "PYTHONDONTWRITEBYTECODE=1")
		}
		env := environ(c, set...)
		if tmp := runTmpdir(work, env); tmp != "" {
			env = append(env, tmp)
		}
		args := argv
		initFront, harnessFirst = false, false
		if ns && s.Sandbox == nil {
			// The harness is not the namespace's first process (a
			// sandbox such as bwrap is, and reaps and signals as one).
			args = withInit(argv, env)
			initFront = len(args) > len(argv)
			harnessFirst = !initFront
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		cmd.Dir = work
		cmd.Stdin = bytes.NewReader(line)
		cmd.Stdout = outW
		cmd.Stderr = errW
		// Bounds the wait for the copy of stdin (the output is read
		// apart, outputs).
		cmd.WaitDelay = s.grace()
		cmd.SysProcAttr = sysProcAttr(ns)
		var extra []*os.File // fd 3 on: nil, not opened
		if secretR != nil {
			extra = make([]*os.File, shim.SecretFD-2)
			extra[shim.SecretFD-3] = secretR
		}
		if handoff {
			extra = append(extra, make([]*os.File, ProtocolFD-2-len(extra))...)
			extra[ProtocolFD-3] = chanW
		}
		cmd.ExtraFiles = extra
		return cmd
	}
	if err := cloexecAll(); err != nil {
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot keep this process's open descriptors from the provider, so it was not started")
	}
	startCmd := (*exec.Cmd).Start
	if ro != nil {
		// Started on the thread that sees the env read-only, which the
		// caller holds until the run is over.
		startCmd = ro.Start
	} else {
		// The child's parent-death signal fires when the thread that
		// forked it ends (go.dev/issue/27505): hold this thread until the
		// run is over, so that no other goroutine can lock it and end it
		// under the run.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	cmd := build(ns)
	if ctx.Err() != nil {
		// The caller's context ended before the process started (a
		// Ctrl-C that came during the verify or the intent's write):
		// nothing is started, and the outcome says so. Started, the
		// provider ran on: the executor's SIGTERM came before the
		// namespace's first process (the init shell) had started the
		// harness, and that process, with no handler, ignored it; the
		// provider ran to its end (exit 0, recorded cancelled) or to
		// the grace's SIGKILL, 2 s after the Ctrl-C.
		res := &Result{AttemptID: attempt, ExitCode: -1, Budgets: b, Egress: []string{}}
		tail := settle(ctx, res, CodeCancelled, b, red, nil, false, func() {})
		res.Error.Message += ", before the provider started: nothing ran"
		return res, tail, nil
	}
	start := time.Now()
	err = startCmd(cmd)
	if err != nil && ns && nsUnavailable(err) {
		// The intent says the namespaces held: falling back now would
		// make it untrue. The next run asks the kernel again.
		forgetNamespaces()
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "the kernel refused the run's user and pid namespaces, which it allowed when this executor first asked (was user.max_user_namespaces lowered?): nothing ran; run it again, and it runs contained by its process group, as its receipt will say")
	}
	if err != nil {
		if s.Sandbox != nil && (errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist)) {
			// The launcher is not installed: say what to do, where it said
			// only os/exec's "executable file not found in $PATH".
			return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "the sandbox launcher %s is not installed here: install it (bwrap: the package bubblewrap, "+
				"apt-get install -y bubblewrap on Debian), or run without the sandbox; it cannot be started", argv[0])
		}
		return nil, "", refusal.Wrap(refusal.InvokeFailed, err, "cannot start %s", argv[0])
	}
	if ctx.Err() != nil {
		// The context ended while the process started (a Ctrl-C after
		// the look above, during the fork and exec): it has not yet
		// started the harness (the init shell takes ~2 ms to fork it,
		// the interpreter tens more to reach the provider), and it is
		// killed before it does, its secrets never written. Left to the
		// SIGTERM below, it ran the provider: the init shell, the first
		// process of a pid namespace with no handler, ignored the
		// signal, then started the harness, which ran to the grace's
		// SIGKILL, 2 s after the Ctrl-C.
		signalRun(cmd.Process.Pid, nsOf(cmd.Process.Pid), syscall.SIGKILL)
		_ = cmd.Wait()
		res := &Result{AttemptID: attempt, ExitCode: -1, Budgets: b, Duration: time.Since(start), Egress: []string{}}
		tail := settle(ctx, res, CodeCancelled, b, red, nil, false, func() {})
		res.Error.Message += ", as its process started: killed before the provider ran"
		return res, tail, nil
	}
	outW.Close()
	errW.Close()
	if handoff {
		chanW.Close()
	}
	outs.start()
	pid := cmd.Process.Pid
	nsID := ""
	if ns {
		nsID = nsOf(pid)
	}
	if secretR != nil {
		secretR.Close()
		go func() {
			_, _ = secretW.Write(bundle)
			secretW.Close()
		}()
	}
	// Without a pid namespace nothing ends the harness's leftovers when it
	// exits (in one the kernel kills them with its first process), and
	// cmd.Wait waits for the pipes they inherited, up to the grace: a
	// run that left a child behind (a background helper started with
	// subprocess) took the grace longer, or, with less time left than
	// that, was recorded timeout, exit status 0, after its ok result.
	// So the harness's exit is watched on its own, and what it left in
	// its process group is killed at once (exitWatch: before cmd.Wait
	// reaps it).
	//
	// Every kill of the run (kill) is ordered with that reap: the pid,
	// and a process group of that id, are the run's only until its
	// process is reaped, after which another process may take them, and
	// a timeout's or a cancel's kill that came as the run ended went to
	// -pid after the reap. The watch waits for the exit without reaping
	// (a zombie keeps its pid), makes its kill, and reaps with mu held
	// and reaped set: no kill is sent after.
	var mu sync.Mutex
	reaped := false
	kill := func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			runSignal(pid, nsID, sig)
		}
	}
	wait := exitWatch(pid)
	var exited chan struct{}
	watchedExit := false // the watch saw the exit, and killed before the reap
	// Closed once cmd.Wait has reaped the run's process (its exit status
	// is cmd.ProcessState's).
	done := make(chan struct{})
	if wait != nil {
		exited = make(chan struct{})
		go func() {
			defer close(done)
			if !wait() {
				// Unknown (the kernel would not say): cmd.Wait
				// decides, and no kill is ordered with its reap.
				_ = cmd.Wait()
				return
			}
			if nsID == "" {
				// In a pid namespace the kernel kills the rest
				// with its first process.
				kill(syscall.SIGKILL)
			}
			watchedExit = true
			close(exited)
			mu.Lock()
			reaped = true
			_ = cmd.Wait()
			mu.Unlock()
		}()
	} else {
		go func() { _ = cmd.Wait(); close(done) }()
	}

	timer := time.NewTimer(time.Duration(b.TimeoutMS) * time.Millisecond)
	defer timer.Stop()
	var why string // why the executor killed the run
	select {
	case <-done:
	case <-exited:
		// The harness ended the run itself: its leftovers are killed,
		// and the pipes close (outs.drain: one that a process outside
		// the group holds is waited for at most the grace).
		<-done
	case <-timer.C:
		why = CodeTimeout
	case <-m.spent:
		why = CodeOutputLimit
	case <-ctx.Done():
		why = CodeCancelled
	}
	if why != "" {
		if why == CodeOutputLimit || nsID != "" && (initFront && initAlone(pid) || harnessFirst && dropsSignal(pid, syscall.SIGTERM) ||
			s.Sandbox != nil && runDropsSignal(pid, nsID, syscall.SIGTERM)) {
			// The output's flood is killed at once; so is a run whose
			// init shell has not started the harness yet (or saw it
			// end): as the first process of a pid namespace it ignores
			// a SIGTERM it has no handler for, and started the harness
			// after it, which ran to the grace's SIGKILL. Where there
			// is no shell, the harness is that first process until it
			// has forked its init (which passes SIGTERM on): one that
			// would drop the SIGTERM (its interpreter still starting) is
			// killed too, as it went on to run the provider to the
			// grace's SIGKILL; and so is a sandbox (bwrap) that has not
			// started the harness yet.
			kill(syscall.SIGKILL)
			<-done
		} else {
			kill(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(s.grace()):
				kill(syscall.SIGKILL)
				<-done
			}
		}
	}
	if !watchedExit && nsID == "" {
		// Whatever outlived the harness goes now, where its exit could
		// not be watched (no waitid here, or the kernel would not say):
		// its process group. In a pid namespace the kernel killed it all
		// when the harness exited.
		runSignal(pid, nsID, syscall.SIGKILL)
	}
	// What the run wrote is in the pipes; a process that outlived it and
	// that nothing above killed (one outside its process group and no
	// longer its descendant, without a pid namespace; or one that
	// inherited the result channel before the harness took it, start-up
	// code's child) may still hold one open: the grace bounds the wait,
	// and output not read to its end fails the run below.
	held := outs.drain(s.grace())
	if why == "" {
		select {
		case <-m.spent:
			why = CodeOutputLimit // spent at the very end: still over budget
		default:
		}
	}
	dur := time.Since(start)

	out, outN := stdout.bytes()
	_, errN := stderr.bytes()
	errb, cut := stderr.tail(StderrTail)
	res := &Result{AttemptID: attempt, ExitCode: exitStatus(cmd.ProcessState), StdoutBytes: outN, StderrBytes: errN, Budgets: b, Duration: dur, Egress: []string{}}
	tail := settle(ctx, res, why, b, red, errb, cut, func() {
		if len(held) > 0 {
			res.Status, res.Error = StatusError, &Error{Code: CodeExited, Message: heldFailure(held, s.grace(), res.ExitCode)}
			return
		}
		parseOutput(res, out, attempt)
	})
	return res, tail, nil
}

// runSignal is signalRun, for the kills of a started run (tests replace
// it, to see when each is sent).
var runSignal = signalRun

// outputs are the pipes a run writes its output on (stdout, stderr, the
// result channel), each copied into its sink until its end.
type outputs struct {
	names []string
	rs    []*os.File
	ws    []io.Writer
	errs  []error
	wg    sync.WaitGroup
}

// add copies r into w once start is called; name is how a failure
// names it (heldFailure).
func (o *outputs) add(name string, r *os.File, w io.Writer) {
	o.names, o.rs, o.ws = append(o.names, name), append(o.rs, r), append(o.ws, w)
}

// pipe makes a pipe whose read end is copied into w (add), and returns
// its write end, the child's.
func (o *outputs) pipe(name string, w io.Writer) (*os.File, error) {
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o.add(name, r, w)
	return pw, nil
}

// start starts the copies, once the child holds the write ends and the
// executor's copies of them are closed.
func (o *outputs) start() {
	o.errs = make([]error, len(o.rs))
	for i := range o.rs {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			if _, o.errs[i] = io.Copy(o.ws[i], o.rs[i]); o.errs[i] != nil {
				// The sink refused a write (the output budget is
				// spent): the read end is closed, so the run's next
				// write fails while its kill lands, as os/exec's
				// copies did.
				o.rs[i].Close()
			}
		}()
	}
}

// drain waits at most limit for every pipe to reach its end, then stops
// the reads that have not, keeping what they read, and returns the names
// of the pipes still held open then: what was read of them may not be all
// that was written.
func (o *outputs) drain(limit time.Duration) (held []string) {
	deadline := time.Now().Add(limit)
	for _, r := range o.rs {
		_ = r.SetReadDeadline(deadline)
	}
	o.wg.Wait()
	for i, err := range o.errs {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			held = append(held, o.names[i])
		}
	}
	return held
}

// close closes the read ends (after drain, or where the run never
// started).
func (o *outputs) close() {
	for _, r := range o.rs {
		r.Close()
	}
}

// heldFailure is the failure of a run, exit status code, whose output
// pipes held (their names) were still open limit after its process had
// exited: its result and byte counts would be those of part of its
// output, which must not pass for all of it. Like podman's (its drain),
// harness_exited.
func heldFailure(held []string, limit time.Duration, code int) string {
	what, verb := held[0], "was"
	if n := len(held); n > 1 {
		sep := " and "
		if strings.Contains(held[n-1], " and ") {
			sep = ", "
		}
		what = strings.Join(held[:n-1], ", ") + sep + held[n-1]
	}
	if strings.Contains(what, " and ") {
		verb = "were"
	}
	return fmt.Sprintf("%s %s still held open %v after the provider exited (exit status %d), by a process the run left behind that the executor could not find to kill (one in a session of its own whose parent had exited): what was read may not be all the run wrote, so its result is not taken; run again, and if it recurs, find that process so that it leaves none behind", what, verb, limit, code)
}

// settle fills res's status for why (a kill the executor made: timeout,
// output limit, cancelled; "" lets parse read the run's output), redacts
// its error and egress of every bundle value, and returns the redacted
// stderr tail the receipt keeps for a run that was not ok: errb, the last
// StderrTail bytes of stderr (cut: stderr wrote bytes before them).
func settle(ctx context.Context, res *Result, why string, b Budgets, red *redactor, errb []byte, cut bool, parse func()) string {
	switch why {
	case CodeTimeout:
		msg := fmt.Sprintf("killed after the %d ms timeout", b.TimeoutMS)
		if res.ExitCode >= 0 && signalOf(res.ExitCode) == 0 {
			// It ended itself on the SIGTERM (a handler, a shell's
			// trap): the exit status recorded is its own, 0 as likely
			// as any, and said "killed" beside exit 0. The run is timed
			// out all the same (docs/receipts.md, exit_code).
			msg = fmt.Sprintf("stopped at the %d ms timeout: it exited %d after the executor's SIGTERM (its own exit status: a run that times out is not ok whatever it exits, and its output is not read as a result)", b.TimeoutMS, res.ExitCode)
		}
		res.Status, res.Error = StatusTimeout, &Error{Code: CodeTimeout, Message: msg}
	case CodeOutputLimit:
		res.Status, res.Error = StatusOutputLimit, &Error{Code: CodeOutputLimit, Message: fmt.Sprintf("killed when stdout and stderr passed %d bytes", b.OutputBytes)}
	case CodeCancelled:
		res.Status, res.Error = StatusError, &Error{Code: CodeCancelled, Message: "the caller cancelled the run (" + context.Cause(ctx).Error() + ")"}
	default:
		parse()
	}
	// A message the executor wrote from numbers and names of its own (an
	// exit status, a signal, a budget, the shim's code) holds no byte of
	// the run's: redacted, a short secret ("a", a PIN) took letters and
	// digits out of it ("the h[redacted]rness exited 3"). Every other
	// message may quote the run's output or the harness's words.
	if res.Error != nil && why == "" && res.Error.Code != CodeExited && res.Error.Code != CodeShimRefused {
		res.Error.Message = red.text(res.Error.Message)
	}
	for i := range res.Egress {
		res.Egress[i] = red.text(res.Egress[i])
	}
	if res.Status == StatusOK {
		return ""
	}
	return red.tail(string(errb), cut)
}

// exitStatus is a finished process's exit status as a Result records it:
// 128+N when signal N killed it, as a shell, bwrap, the harness's own init
// (the first process of a pid namespace) and the container runtimes report
// it, so that a death by signal reads the same whatever ran in front of the
// harness; -1 when there is no status.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// exitChannelClosed is the harness's exit status when provider code closed
// its result channel (cruxible_provider_runtime.harness.EXIT_CHANNEL_CLOSED).
const exitChannelClosed = 74

// signalOf returns the signal an exit status of 128+N reports (exitStatus),
// or 0.
func signalOf(code int) syscall.Signal {
	if code <= 128 || code > 128+64 {
		return 0
	}
	if s := syscall.Signal(code - 128); unix.SignalName(s) != "" {
		return s
	}
	return 0
}

// duplicateKey reports a key that an object of the valid JSON text b
// holds twice (compared decoded, as the harness's parser compares them).
// The harness refuses such a request before it reads its run_id, so its
// answer could not be told from a misbehaving harness's (protocol_error):
// the executor refuses it first, as the input it is. b is valid JSON no
// deeper than MaxInputDepth (pythonCannotRead).
func duplicateKey(b []byte) (string, bool) {
	if bytes.IndexByte(b, '{') < 0 {
		return "", false
	}
	var ke *strictjson.KeyError
	if errors.As(strictjson.CheckKeys(b, nil), &ke) {
		return ke.Key, true
	}
	return "", false
}

// MaxInputDepth is how deeply a call's input may nest arrays and objects.
// CPython's json stops at its recursion limit (1000 frames, less what the
// harness's own stack takes): deeper input would leave the harness unable
// to read its request, or even its run_id.
const MaxInputDepth = 512

// MaxInputIntDigits is how many digits an integer in a call's input may
// have: CPython's json refuses longer ones (sys.int_info.default_max_str_digits),
// so the harness could not read its request, or even its run_id.
const MaxInputIntDigits = 4300

// pythonCannotRead says what in the valid, compact JSON text b the
// harness's CPython cannot take as it is ("" when nothing): nesting deeper
// than MaxInputDepth, an integer longer than MaxInputIntDigits digits, or
// a number beyond a float64's range, which CPython reads as an infinity
// that no result may carry. One pass, outside strings.
func pythonCannotRead(b []byte) string {
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		case c == '"':
			inStr = true
			continue
		case c == '[' || c == '{':
			if depth++; depth > MaxInputDepth {
				return fmt.Sprintf("nesting deeper than %d levels: the harness's JSON parser (CPython's) reads at most %d", MaxInputDepth, MaxInputDepth)
			}
			continue
		case c == ']' || c == '}':
			depth--
			continue
		case c != '-' && (c < '0' || c > '9'):
			continue
		}
		j, integer := i, true
		for j < len(b) && strings.IndexByte("-+0123456789.eE", b[j]) >= 0 {
			if b[j] == '.' || b[j] == 'e' || b[j] == 'E' {
				integer = false
			}
			j++
		}
		num := string(b[i:j])
		i = j - 1
		if integer {
			if n := len(strings.TrimPrefix(num, "-")); n > MaxInputIntDigits {
				return fmt.Sprintf("an integer of %d digits: the harness's JSON parser (CPython's) reads at most %d", n, MaxInputIntDigits)
			}
			continue
		}
		if f, err := strconv.ParseFloat(num, 64); err != nil && math.IsInf(f, 0) {
			return fmt.Sprintf("the number %s, beyond a float64's range: the harness (CPython) would read it as an infinity", Clip(num, 40))
		}
	}
	return ""
}

// codeWord is what an error code looks like.
var codeWord = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// parseOutput reads stdout, trimmed, as exactly one result document of
// this run, after an exit with res.ExitCode (any backend; 128+N: killed by
// signal N).
func parseOutput(res *Result, out []byte, attempt string) {
	fail := func(code, format string, a ...any) {
		res.Status, res.Value = StatusError, nil
		res.Error = &Error{Code: code, Message: fmt.Sprintf(format, a...)}
	}
	if res.ExitCode == exitChannelClosed && len(bytes.TrimSpace(out)) == 0 {
		fail(CodeProtocolError, "provider code closed the harness's result channel (os.closerange(3, …), as daemonizing libraries do, or os.close), so no result could be written (the harness exited %d)", exitChannelClosed)
		return
	}
	if sig := signalOf(res.ExitCode); sig != 0 {
		// The same words whether the executor saw the signal itself or a
		// launcher, an init or podman reported it as 128+N (a harness that
		// exits 128+N itself reads the same).
		fail(CodeExited, "the harness was killed by %s (%v; exit status %d)", unix.SignalName(sig), sig, res.ExitCode)
		return
	}
	if res.ExitCode != 0 {
		fail(CodeExited, "the harness exited %d", res.ExitCode)
		return
	}
	var doc struct {
		Status *string          `json:"status"`
		RunID  *string          `json:"run_id"`
		Result json.RawMessage  `json:"result"`
		Error  *Error           `json:"error"`
		Egress *[]string        `json:"egress"`
		Extra  map[string]any   `json:"-"`
		_      *json.RawMessage `json:"-"`
	}
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		fail(CodeProtocolError, "the harness wrote no result on stdout")
		return
	}
	if !utf8.Valid(trimmed) {
		// JSON is UTF-8 (RFC 8259 §8.1); encoding/json would keep such
		// bytes in the result, and hand them to the caller's JSON.
		fail(CodeProtocolError, "stdout is not valid UTF-8")
		return
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		fail(CodeProtocolError, "stdout is not one JSON result: %v", err)
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		fail(CodeProtocolError, "stdout holds more than one JSON document")
		return
	}
	if doc.Status == nil || doc.RunID == nil || *doc.RunID != attempt || doc.Egress == nil {
		fail(CodeProtocolError, "the result lacks status, egress or this run's run_id")
		return
	}
	switch *doc.Status {
	case "ok":
		if doc.Error != nil || doc.Result == nil {
			fail(CodeProtocolError, "an ok result must carry result and no error")
			return
		}
		res.Status, res.Value = StatusOK, doc.Result
	case "error":
		if doc.Error == nil || doc.Error.Code == "" || doc.Result != nil {
			fail(CodeProtocolError, "an error result must carry error {code, message} and no result")
			return
		}
		if !slices.Contains(ResultCodes, doc.Error.Code) {
			// Not one the harness writes: the provider wrote stdout
			// itself, and a code of its own would pass for the harness's
			// or the executor's (cancelled, timeout), or carry anything.
			what := "a code that is not a word"
			if codeWord.MatchString(doc.Error.Code) {
				// Shown as it is, so a secret value here is redacted
				// like one in any message (an escaped form would not be).
				what = doc.Error.Code
			}
			fail(CodeProtocolError, "the result's error code (%s) is not one of %s", what, strings.Join(ResultCodes, ", "))
			return
		}
		res.Status, res.Error = StatusError, doc.Error
	default:
		fail(CodeProtocolError, "unknown result status %q", *doc.Status)
		return
	}
	res.Egress = append([]string{}, (*doc.Egress)...)
}

func replayed(o *receipts.Outcome, b Budgets) *Result {
	r := &Result{AttemptID: o.AttemptID, Status: Status(o.Status), ExitCode: o.ExitCode, StdoutBytes: o.StdoutBytes,
		StderrBytes: o.StderrBytes, Egress: append([]string{}, o.EgressObserved...), Replayed: true, ReplayOf: o.ReplayOf, ResultDigest: o.ResultDigest, Budgets: b}
	return r
}

// removeAll removes a run's working directory, making directories the
// provider left read-only writable first.
// workdirPrefix names the runs' working directories in WorkdirParent.
const workdirPrefix = "cruxprov-run-"

// workdirGrace is how old a working directory must be before a sweep may
// take it: a run locks its directory right after making it, and this
// covers the moment between.
const workdirGrace = time.Minute

// sweepWorkdirs removes the working directories an executor killed
// mid-run (SIGKILL, a crash) left in parent: this user's, older than
// workdirGrace, and locked by no live run. Best effort: a run does not
// fail for what it could not sweep.
func sweepWorkdirs(parent string) {
	names, err := filepath.Glob(filepath.Join(parent, workdirPrefix+"*"))
	if err != nil {
		return
	}
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < workdirGrace {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		d, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			removeAll(p) // the lock goes with d: nobody runs in it
		}
		d.Close()
	}
}

// removeAll removes a run's workdir, whatever the provider left in it: a
// directory it made unwritable (or unreadable) is given u+rwx first, by
// descriptor, so that one nested past PATH_MAX is reached too (a walk by
// path stopped there, ENAMETOOLONG, and the workdir outlived the run and
// every later sweep for a user who is not root).
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		openDirsAt(fd)
	} else if os.Chmod(dir, 0o700) == nil {
		if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			openDirsAt(fd)
		}
	}
	_ = os.RemoveAll(dir)
}

// openDirsAt gives the directory open as dirfd and every directory under it
// mode 0700, by descriptor (fchmod, fchmodat, openat; symlinks never
// followed: getdents says what is a directory, and its maker is dead),
// and closes dirfd.
func openDirsAt(dirfd int) {
	_ = unix.Fchmod(dirfd, 0o700)
	f := os.NewFile(uintptr(dirfd), "workdir")
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		_ = unix.Fchmodat(dirfd, e.Name(), 0o700, 0)
		if c, err := unix.Openat(dirfd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			openDirsAt(c)
		}
	}
}

// recorder writes the run's outcome to the ledger.
type recorder struct {
	l       Ledger
	attempt string
	egress  []string
	begun   bool
	key     string // set when a refusal was recorded without its idempotency key
}

// refuse records a refusal found before the intent: intent, then a
// refused outcome. The refusal is returned whatever the ledger says.
//
// The idempotency key is not consulted for a run refused before it could
// start (as payment APIs keep no result for a request that failed
// validation): Begin is given the intent without the key, so it can
// neither replay a recorded ok outcome under it (the ledger would then
// show a replay for a run that was refused) nor refuse the record as
// idempotency_conflict (the refusal would go unrecorded), and a later
// call with the key is decided as if this one had not happened. The
// refused outcome's message names the key.
func (r *recorder) refuse(ctx context.Context, in receipts.Intent, err error) error {
	if r.l == nil {
		return err
	}
	key := in.IdempotencyKey
	in.IdempotencyKey = ""
	dec, berr := r.l.Begin(context.WithoutCancel(ctx), in)
	if berr != nil || dec.Replay != nil {
		// A Ledger that replays without a key has already written the
		// attempt's outcome: nothing more to add.
		return err
	}
	r.begun = true
	r.key = key
	return r.finishRefused(ctx, err)
}

// typed returns err when it carries a refusal code or is the context's
// own, and otherwise an invoke_failed refusal saying what failed.
func typed(err error, what string) error {
	if refusal.CodeOf(err) != "" || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return refusal.Wrap(refusal.InvokeFailed, err, "%s", what)
}

func (r *recorder) finishRefused(ctx context.Context, err error) error {
	err = typed(err, "the run could not start")
	if r.l == nil || !r.begun {
		return err
	}
	msg := err.Error()
	if r.key != "" {
		msg += fmt.Sprintf(" (refused before idempotency key %q was consulted: the key is not used)", r.key)
	}
	o := receipts.Outcome{AttemptID: r.attempt, Status: receipts.StatusRefused, ExitCode: -1,
		ErrorCode: string(refusal.CodeOf(err)), ErrorMessage: Clip(msg, ReceiptMessage),
		EgressDeclared: nonNil(r.egress), EgressObserved: []string{}, EndedAt: time.Now().UTC()}
	if o.ErrorCode == "" { // the context ended: the receipt still names a code of the closed set
		o.ErrorCode = string(refusal.InvokeFailed)
	}
	if r.l.Finish(context.WithoutCancel(ctx), o) != nil {
		return err // the intent stays an orphan; the refusal is what matters
	}
	return &RecordedRefusal{AttemptID: r.attempt, Err: err}
}

// RecordedRefusal is the error of a run refused after its intent was
// written, once its refused outcome is in the ledger too: Err is the
// refusal (errors.As and errors.Is see through to it), AttemptID the
// receipt that records it, for the caller to point at. A zero (or nil)
// RecordedRefusal, which no executor returns, says that no refusal was
// given rather than panic.
type RecordedRefusal struct {
	AttemptID string
	Err       error
}

func (e *RecordedRefusal) Error() string {
	if e == nil || e.Err == nil {
		return "invoke: a run refused and recorded, with no refusal given"
	}
	return e.Err.Error()
}

func (e *RecordedRefusal) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

func (r *recorder) finish(ctx context.Context, res *Result, tail string) error {
	if r.l == nil {
		return nil
	}
	if err := r.l.Finish(context.WithoutCancel(ctx), r.outcome(res, tail)); err != nil {
		return asRefusal(err, refusal.LedgerWriteFailed, "cannot write the outcome")
	}
	return nil
}

// outcome is the receipt of a run that ended as res, with what a receipt
// keeps of the provider's words.
func (r *recorder) outcome(res *Result, tail string) receipts.Outcome {
	o := receipts.Outcome{AttemptID: r.attempt, Status: string(res.Status), ExitCode: res.ExitCode,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, StderrTail: tail,
		EgressDeclared: nonNil(r.egress), EndedAt: time.Now().UTC()}
	if res.Status == StatusOK {
		o.ResultDigest = digest.Sum(res.Value).String()
	}
	if res.Error != nil {
		o.ErrorCode, o.ErrorMessage = Clip(res.Error.Code, receiptCode), Clip(res.Error.Message, ReceiptMessage)
	}
	o.EgressObserved, o.EgressObservedDropped = keptEgress(res.Egress)
	return o
}

// Clip is a provider's text s cut to at most n bytes at a character
// boundary, saying how much was cut: what a receipt keeps of it, and what
// a caller shows a person; s itself when it fits.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%s … (%d bytes more)", s[:i], len(s)-i)
}

// keptEgress is what a receipt keeps of the observed egress (see
// ReceiptEgress) and how many URLs it drops.
func keptEgress(urls []string) ([]string, int) {
	kept, size := make([]string, 0, len(urls)), 0
	for i, u := range urls {
		u = Clip(u, receiptURL)
		if size+len(u) > ReceiptEgress {
			return kept, len(urls) - i
		}
		kept, size = append(kept, u), size+len(u)
	}
	return kept, 0
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

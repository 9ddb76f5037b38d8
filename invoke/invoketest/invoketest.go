// Package invoketest is the executor conformance battery of DESIGN §10: a
// test suite any invoke.Executor registers in its own tests, as
// testing/fstest.TestFS is for file systems, run with the hostile-tool
// fixture provider (internal/fixtures.BuildHostile) installed in a real
// sealed env.
//
// Run checks that a hostile tool cannot read the host's environment nor a
// descriptor the executor's process opened without O_CLOEXEC; that the
// allowlisted and injected variables pass; that secrets arrive on fd 3 and
// nowhere else (argv, environ, the workdir); that the timeout kills a tool
// ignoring SIGTERM with its children, a setsid() one included; that the
// output budget kills a flood; that a non-zero exit surfaces with its
// stderr tail redacted of every secret value (values with a quote, a
// backslash, a newline and non-ASCII, in raw, JSON-escaped and repr forms);
// that unparseable output is a protocol error; that each call has a fresh
// empty workdir, gone afterwards; that every dispatch reaches the ledger
// with the outcome it had; and that an attempt killed between intent and
// outcome is an orphan carrying everything needed to reconcile it; that a
// tool that signals itself (SIGTERM, SIGABRT, abort(), SIGKILL) dies of it
// and is recorded as killed by that signal, exit status 128+N, whatever
// runs in front of it; that its orphans are reaped, not left zombies; and
// that a tool closing every descriptor above 2 (the harness's result
// channel with them) is a protocol_error saying so; and that code a
// dependency's .pth file runs at interpreter start cannot write the
// result (what it prints goes to stderr), and ends the run as a clear
// outcome when it exits; a runtime before 0.2.0 still gets the channel on
// fd 1.
//
// BuildLocal builds the fixture env a local executor runs the battery on.
// This package does not implement an executor.
package invoketest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/platform"
	pyrt "github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// Fixtures is the hostile-tool provider as an executor sees it.
type Fixtures struct {
	// Env is the sealed env's directory, Python its interpreter link
	// relative to Env.
	Env, Python string
	// Provider is the provider's name, Platform the env's platform.
	Provider, Platform string
	// MaterializationDigest and SealDigest name the env.
	MaterializationDigest, SealDigest digest.Digest
	// Entrypoints maps each entrypoint name to its object and
	// implementation digest.
	Entrypoints map[string]Entrypoint
	// Manifest is the provider's manifest (budgets, secrets, egress).
	Manifest *manifest.Manifest
	// Image, for a container executor, is the provider's image by digest
	// (REF@sha256:… or oci:DIR@sha256:…; MaterializationDigest is its
	// manifest digest): Env and Python are then empty, the workdir is the
	// container's (its freshness is checked, not its host path), and the
	// container's own removal is the executor's tests' to prove.
	Image string
	// Verify is the check before every call (nil: seal.Verify of Env).
	Verify func(ctx context.Context) error `json:"-"`
	// Runtime is the version of the runtime the env or image holds
	// (invoke.Call.Runtime).
	Runtime string
	// RuntimeEnv are variables the runtime sets itself in the child (podman
	// sets HOME from the image's passwd and HOSTNAME): allowed, as long as
	// their value is not the host's.
	RuntimeEnv []string
}

// Entrypoint is one of the fixture's entrypoints.
type Entrypoint struct {
	Object               string
	ImplementationDigest digest.Digest
}

// Call returns a call of entrypoint ep with input, the manifest's budgets,
// secrets and egress, and a Verify hook that runs seal.Verify (fast).
func (fx Fixtures) Call(ep string, input any, secrets map[string]string) *invoke.Call {
	raw, _ := json.Marshal(input)
	e := fx.Entrypoints[ep]
	m := fx.Manifest
	env := fx.Env
	verify := fx.Verify
	if verify == nil {
		verify = func(ctx context.Context) error {
			_, err := seal.Verify(ctx, env, seal.Options{})
			return err
		}
	}
	return &invoke.Call{
		Env: fx.Env, Python: fx.Python, Image: fx.Image, Runtime: fx.Runtime, Provider: fx.Provider, Entrypoint: ep, Object: e.Object,
		ImplementationDigest: e.ImplementationDigest, MaterializationDigest: fx.MaterializationDigest,
		SealDigest: fx.SealDigest, Platform: fx.Platform,
		Budgets: invoke.Budgets{TimeoutMS: m.Budgets.TimeoutMS, OutputBytes: m.Budgets.OutputBytes},
		Secrets: m.Secrets, Egress: m.Egress, Input: raw,
		Resolve: func(_ context.Context, ref string) (string, error) {
			v, ok := secrets[ref]
			if !ok {
				return "", fmt.Errorf("no value for %s", ref)
			}
			return v, nil
		},
		Verify: verify,
	}
}

// TempDir returns a new temporary directory for BuildLocal that t's
// cleanup removes: the env BuildLocal seals in it and its store's blobs
// are read-only (directories 0555), which testing's own removal of a
// t.TempDir cannot remove for a user who is not root ("TempDir RemoveAll
// cleanup: … permission denied", failing a battery that passed). The
// cleanup gives the owner write permission on every directory below it
// first.
func TempDir(t testing.TB) string {
	t.Helper()
	return testdir.New(t)
}

// BuildLocal builds the fixture wheels and the hostile provider into
// dir/fixtures, stores them in a store at dir/store, and materializes and
// seals the provider's env there for the host platform of python (a real
// interpreter path). The result is readable by every user when dir is.
// The env and the store's blobs are read-only: give it TempDir(t) in a
// test, or remove dir after making its directories writable.
func BuildLocal(ctx context.Context, dir, python string) (Fixtures, error) {
	return BuildLocalWith(ctx, dir, python, LocalOptions{})
}

// LocalOptions are the choices BuildLocalWith adds to BuildLocal's.
type LocalOptions struct {
	// NoCompile makes the env without bytecode (env create --no-compile):
	// its modules are compiled in memory on every run, and an executor
	// must keep the interpreter from writing them into the sealed env,
	// which the next call's verify refuses as drift (a run as root can).
	NoCompile bool
}

// BuildLocalWith is BuildLocal with the choices of o.
func BuildLocalWith(ctx context.Context, dir, python string, o LocalOptions) (Fixtures, error) {
	set, err := fixtures.Build(filepath.Join(dir, "fixtures"), fixtures.Options{})
	if err != nil {
		return Fixtures{}, err
	}
	prov, err := fixtures.BuildHostile(filepath.Join(dir, "fixtures"), set.Runtime, fixtures.Options{})
	if err != nil {
		return Fixtures{}, err
	}
	st, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		return Fixtures{}, err
	}
	put := func(w fixtures.Wheel) (lockfile.ResolvedWheel, error) {
		b, err := os.ReadFile(w.Path)
		if err != nil {
			return lockfile.ResolvedWheel{}, err
		}
		if err := st.Put(ctx, w.SHA256, w.Size, bytes.NewReader(b)); err != nil {
			return lockfile.ResolvedWheel{}, err
		}
		return lockfile.ResolvedWheel{Name: w.Name, Version: w.Version, Filename: w.Filename, Size: w.Size, SHA256: w.SHA256}, nil
	}
	for _, d := range prov.Dependencies { // the runtime and acme-startup
		if _, err := put(d); err != nil {
			return Fixtures{}, err
		}
	}
	root, err := put(prov.Wheel)
	if err != nil {
		return Fixtures{}, err
	}
	in, err := materialize.ProbeInterpreter(ctx, python)
	if err != nil {
		return Fixtures{}, err
	}
	plat, err := platform.Host(ctx, python)
	if err != nil {
		return Fixtures{}, err
	}
	w, err := wheel.Open(prov.Path)
	if err != nil {
		return Fixtures{}, err
	}
	m, _, err := manifest.FromWheel(w)
	w.Close()
	if err != nil {
		return Fixtures{}, err
	}
	lock, _, err := lockfile.Parse(prov.Lock)
	if err != nil {
		return Fixtures{}, err
	}
	res, err := lockfile.Resolve(lock, plat, lockfile.Options{})
	if err != nil {
		return Fixtures{}, err
	}
	r, err := materialize.Create(ctx, st, materialize.Request{Platform: plat, Interpreter: in, Resolution: res, RootWheel: &root, NoCompile: o.NoCompile})
	if err != nil {
		return Fixtures{}, err
	}
	sd, err := r.Seal.ComputeDigest()
	if err != nil {
		return Fixtures{}, err
	}
	fx := Fixtures{Env: r.Dir, Python: r.Seal.Env.Python, Runtime: pyrt.RuntimeOf(r.Seal.Resolution.Packages), Provider: m.Name, Platform: plat.ID(),
		MaterializationDigest: r.Digest, SealDigest: sd, Manifest: m, Entrypoints: map[string]Entrypoint{},
		// invoke.Subprocess gives a run its workdir as TMPDIR.
		RuntimeEnv: []string{"TMPDIR"}}
	for _, e := range prov.Entrypoints {
		fx.Entrypoints[e.Name] = Entrypoint{Object: e.Object, ImplementationDigest: e.ImplementationDigest}
	}
	return fx, nil
}

// Run runs the battery against the executors newExecutor makes: each is
// given a real receipts ledger the battery reads back.
func Run(t *testing.T, newExecutor func(t *testing.T, ledger invoke.Ledger) invoke.Executor, fx Fixtures) {
	t.Helper()
	b := &battery{new: newExecutor, fx: fx}
	t.Run("HostEnvironmentAndDescriptors", b.hostEnv)
	t.Run("SecretsOnFD3Only", b.secretsOnly)
	t.Run("SecretBundleAtItsLimit", b.bundleLimit)
	t.Run("TimeoutKillsTheTree", b.timeout)
	t.Run("OutputBudgetKillsAFlood", b.flood)
	t.Run("NonZeroExitRedactedTail", b.crash)
	t.Run("TimeoutAndFloodRedactedTail", b.crashLimits)
	t.Run("UnparseableOutput", b.garbage)
	t.Run("OversizedResultRecorded", b.oversized)
	t.Run("FreshWorkdir", b.workdir)
	t.Run("KilledBetweenIntentAndOutcome", b.orphan)
	t.Run("SelfSignalKills", b.selfSignal)
	t.Run("OrphansReaped", b.reaped)
	t.Run("ResultChannelClosed", b.channelClosed)
	t.Run("StartupCodeCannotWriteTheResult", b.startup)
}

type battery struct {
	new func(t *testing.T, ledger invoke.Ledger) invoke.Executor
	fx  Fixtures
}

// secrets are values that hold a quote, a backslash, a newline and non-ASCII.
var secrets = map[string]string{
	"acme/alpha": `al"pha\back` + "\nslash-é☃-" + "α-secret",
	"acme/beta":  "b'eta-\u2028-t0k3n-\u00ff\\x",
}

// open returns an executor with a fresh ledger and the ledger's path.
func (b *battery) open(t *testing.T) (invoke.Executor, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	l, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return b.new(t, l), path
}

func (b *battery) run(t *testing.T, ex invoke.Executor, c *invoke.Call) *invoke.Result {
	t.Helper()
	res, err := ex.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run(%s): %v", c.Entrypoint, err)
	}
	return res
}

// scan returns the ledger's attempts, strictly.
func scan(t *testing.T, path string) *receipts.ScanResult {
	t.Helper()
	r, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatalf("scan %s: %v", path, err)
	}
	return r
}

// outcome returns the ledger's outcome of attempt id.
func outcome(t *testing.T, path, id string) *receipts.Outcome {
	t.Helper()
	for _, a := range scan(t, path).Attempts {
		if a.Intent.AttemptID == id {
			if a.Outcome == nil {
				t.Fatalf("attempt %s has no outcome in the ledger", id)
			}
			return a.Outcome
		}
	}
	t.Fatalf("attempt %s is not in the ledger", id)
	return nil
}

// recorded checks the ledger holds res's outcome as it was.
func recorded(t *testing.T, path string, res *invoke.Result) *receipts.Outcome {
	t.Helper()
	o := outcome(t, path, res.AttemptID)
	if o.Status != string(res.Status) || o.ExitCode != res.ExitCode || o.StdoutBytes != res.StdoutBytes || o.StderrBytes != res.StderrBytes {
		t.Errorf("ledger outcome %+v does not match the result %+v", o, res)
	}
	if res.Error != nil && o.ErrorCode != res.Error.Code {
		t.Errorf("ledger error code %q, result %q", o.ErrorCode, res.Error.Code)
	}
	return o
}

type probe struct {
	Environ    map[string]string `json:"environ"`
	EnvironRaw string            `json:"environ_raw"`
	Argv       []string          `json:"argv"`
	Cmdline    string            `json:"cmdline"`
	FDs        map[string]string `json:"fds"`
	Cwd        string            `json:"cwd"`
	CwdMode    int               `json:"cwd_mode"`
	CwdEntries []string          `json:"cwd_entries"`
	Secrets    map[string]string `json:"secrets"`
}

func (b *battery) probe(t *testing.T, ex invoke.Executor, path string, c *invoke.Call) (probe, *invoke.Result) {
	t.Helper()
	res := b.run(t, ex, c)
	if res.Status != invoke.StatusOK {
		t.Fatalf("probe: %+v %+v", res, res.Error)
	}
	recorded(t, path, res)
	var p probe
	if err := json.Unmarshal(res.Value, &p); err != nil {
		t.Fatal(err)
	}
	return p, res
}

func (b *battery) hostEnv(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "host-credential-must-not-leak")
	t.Setenv("CRUXPROV_BATTERY_HOST_ONLY", "host-only")
	t.Setenv("CRUXPROV_BATTERY_ALLOWED", "allowed-value")
	// A careless embedding program's descriptor: no O_CLOEXEC.
	leak := filepath.Join(t.TempDir(), "leaked-descriptor")
	if err := os.WriteFile(leak, []byte("the parent's private file"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(leak, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	ex, path := b.open(t)
	c := b.fx.Call("probe", nil, secrets)
	c.Environ = os.Environ()
	c.Allow = []string{"CRUXPROV_BATTERY_ALLOWED", "NOT_SET_ANYWHERE"}
	c.Inject = []string{"CRUXPROV_INJECTED=injected"}
	p, _ := b.probe(t, ex, path, c)
	want := map[string]string{"CRUXPROV_BATTERY_ALLOWED": "allowed-value", "CRUXPROV_INJECTED": "injected"}
	for k, v := range want {
		if p.Environ[k] != v {
			t.Errorf("child env %s = %q, want %q", k, p.Environ[k], v)
		}
	}
	runtime := map[string]bool{}
	for _, k := range b.fx.RuntimeEnv {
		runtime[k] = true
	}
	for k, v := range p.Environ {
		if runtime[k] {
			if hv, ok := os.LookupEnv(k); ok && hv == v && v != "" {
				t.Errorf("child env %s holds the host's value %q", k, v)
			}
			continue
		}
		if _, ok := want[k]; !ok && k != "LC_CTYPE" { // CPython may set LC_CTYPE (PEP 538)
			t.Errorf("child env has %s, which is neither allowed nor injected", k)
		}
	}
	if strings.Contains(p.EnvironRaw, "host-credential") || strings.Contains(p.EnvironRaw, "host-only") {
		t.Errorf("host variables reached the child: %q", p.EnvironRaw)
	}
	for n, target := range p.FDs {
		if strings.HasSuffix(target, " "+leak) || strings.Contains(target, "leaked-descriptor") {
			t.Errorf("the parent's descriptor %d reached the child as fd %s", fd, n)
		}
	}
	for _, n := range []string{"0", "1", "2"} {
		if _, ok := p.FDs[n]; !ok {
			t.Errorf("child has no fd %s", n)
		}
	}
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// forms are the text forms of a value the battery looks for.
func forms(v string) []string {
	j, _ := json.Marshal(v)
	var asc strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			asc.WriteString(`\` + string(r))
		case r == '\n':
			asc.WriteString(`\n`)
		case r < 0x20 || r > 0x7e:
			fmt.Fprintf(&asc, `\u%04x`, r)
		default:
			asc.WriteRune(r)
		}
	}
	q := strconv.Quote(v)
	return []string{v, string(j[1 : len(j)-1]), asc.String(), q[1 : len(q)-1]}
}

func (b *battery) secretsOnly(t *testing.T) {
	ex, path := b.open(t)
	c := b.fx.Call("probe", map[string]bool{"touch": false}, secrets)
	c.Environ = os.Environ()
	p, _ := b.probe(t, ex, path, c)
	for ref, v := range secrets {
		if p.Secrets[ref] != sha(v) {
			t.Errorf("secret %s: the child got sha256 %s, want %s", ref, p.Secrets[ref], sha(v))
		}
		for _, f := range forms(v) {
			if strings.Contains(p.EnvironRaw, f) || strings.Contains(p.Cmdline, f) || strings.Contains(strings.Join(p.Argv, " "), f) {
				t.Errorf("secret %s is visible in the child's environment or argv", ref)
			}
		}
	}
	readablePipes(t, p)
	if len(p.CwdEntries) != 0 {
		t.Errorf("the workdir holds %v", p.CwdEntries)
	}
	// No secret declared, none delivered: fd 3 is not opened.
	c = b.fx.Call("probe", nil, nil)
	c.Secrets = nil
	p, _ = b.probe(t, ex, path, c)
	if len(p.Secrets) != 0 {
		t.Errorf("secrets delivered with none declared: %v", p.Secrets)
	}
	readablePipes(t, p)
}

// bundleLimit: a bundle of exactly invoke.MaxSecretBundle bytes (64 KiB,
// DESIGN §10 "≤ 64 KiB") reaches the provider whole, through every step
// that bounds it (the executor, a container's entry shim, the harness);
// one byte more is refused secret_bundle_too_large with nothing spawned.
func (b *battery) bundleLimit(t *testing.T) {
	ex, path := b.open(t)
	// {"acme/alpha":"A…","acme/beta":"B…"}: 32 bytes besides the values.
	const frame = len(`{"acme/alpha":"","acme/beta":""}`)
	half := (invoke.MaxSecretBundle - frame) / 2
	vals := map[string]string{
		"acme/alpha": strings.Repeat("a", half),
		"acme/beta":  strings.Repeat("b", invoke.MaxSecretBundle-frame-half),
	}
	p, _ := b.probe(t, ex, path, b.fx.Call("probe", nil, vals))
	for ref, v := range vals {
		if p.Secrets[ref] != sha(v) {
			t.Errorf("secret %s of a bundle of exactly %d bytes: the child got sha256 %q, want %s", ref, invoke.MaxSecretBundle, p.Secrets[ref], sha(v))
		}
	}
	vals["acme/beta"] += "b"
	before := len(scan(t, path).Attempts)
	res, err := ex.Run(context.Background(), b.fx.Call("probe", nil, vals))
	if res != nil || !errors.Is(err, refusal.SecretBundleTooLarge) {
		t.Fatalf("a bundle of %d bytes: %+v, %v; want secret_bundle_too_large", invoke.MaxSecretBundle+1, res, err)
	}
	r := scan(t, path)
	if len(r.Attempts) != before+1 || r.Attempts[before].Outcome == nil || r.Attempts[before].Outcome.Status != receipts.StatusRefused {
		t.Errorf("the refused attempt is not recorded refused: %+v", r.Attempts)
	}
}

// readablePipes fails when provider code has a readable pipe above the
// standard streams: a secret channel left open (the harness's own
// protocol channel is the write end of stdout's pipe).
func readablePipes(t *testing.T, p probe) {
	t.Helper()
	for n, v := range p.FDs {
		if n != "0" && n != "1" && n != "2" && strings.HasPrefix(v, "r") && strings.Contains(v, "pipe:") {
			t.Errorf("fd %s (%s) is a readable pipe when provider code runs", n, v)
		}
	}
}

// ProcsWith returns the live pids (not zombies) whose argv holds token:
// what a run left behind, when its processes carry a token of the test.
func ProcsWith(token string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(token)) {
			if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
				if i := bytes.LastIndexByte(st, ')'); i > 0 && bytes.HasPrefix(bytes.TrimSpace(st[i+1:]), []byte("Z")) {
					continue // a zombie is dead
				}
			}
			out = append(out, pid)
		}
	}
	return out
}

func (b *battery) timeout(t *testing.T) {
	ex, path := b.open(t)
	token := fmt.Sprintf("cruxprov-battery-term-%d-%d", os.Getpid(), time.Now().UnixNano())
	c := b.fx.Call("term", map[string]string{"token": token}, secrets)
	c.Limits.TimeoutMS = 1500
	seen := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				seen <- most
				return
			case <-time.After(50 * time.Millisecond):
				if n := len(ProcsWith(token)); n > most {
					most = n
				}
			}
		}
	}()
	start := time.Now()
	res := b.run(t, ex, c)
	close(stop)
	most := <-seen
	if res.Status != invoke.StatusTimeout {
		t.Fatalf("status %s (%+v), want timeout", res.Status, res.Error)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("the timeout took %v", el)
	}
	if most < 2 {
		t.Errorf("saw %d of the tool's 2 children running (the test proves nothing)", most)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(ProcsWith(token)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := ProcsWith(token); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Errorf("processes of the run survived the timeout: %v", left)
	}
	if res.Budgets.TimeoutMS != 1500 {
		t.Errorf("budget timeout %d, want the caller's lower 1500", res.Budgets.TimeoutMS)
	}
	recorded(t, path, res)
}

func (b *battery) flood(t *testing.T) {
	ex, path := b.open(t)
	c := b.fx.Call("flood", map[string]int{"bytes": 64 << 20}, secrets)
	c.Limits.OutputBytes = 256 << 10
	start := time.Now()
	res := b.run(t, ex, c)
	if res.Status != invoke.StatusOutputLimit {
		t.Fatalf("status %s (%+v), want output_limit", res.Status, res.Error)
	}
	if res.StdoutBytes+res.StderrBytes < 256<<10 {
		t.Errorf("killed after %d+%d bytes, under the budget", res.StdoutBytes, res.StderrBytes)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the flood ran %v", el)
	}
	// A caller cannot raise the manifest's budget.
	c = b.fx.Call("flood", map[string]int{"bytes": 4 << 20}, secrets)
	c.Limits.OutputBytes = 1 << 40
	res2 := b.run(t, ex, c)
	if res2.Budgets.OutputBytes != b.fx.Manifest.Budgets.OutputBytes || res2.Status != invoke.StatusOutputLimit {
		t.Errorf("a caller raised output_bytes: budget %d, status %s", res2.Budgets.OutputBytes, res2.Status)
	}
	recorded(t, path, res)
	recorded(t, path, res2)
}

func (b *battery) crash(t *testing.T) {
	ex, path := b.open(t)
	res := b.run(t, ex, b.fx.Call("crash", nil, secrets))
	if res.Status != invoke.StatusError || res.ExitCode != 3 {
		t.Fatalf("status %s exit %d (%+v), want error exit 3", res.Status, res.ExitCode, res.Error)
	}
	o := recorded(t, path, res)
	if !strings.Contains(o.StderrTail, "crash: the last line of stderr") {
		t.Errorf("the stderr tail lacks the tool's last line: %q", o.StderrTail)
	}
	if !strings.Contains(o.StderrTail, "[redacted]") {
		t.Errorf("the stderr tail shows no redaction: %q", o.StderrTail)
	}
	resJSON, _ := json.Marshal(res)
	raw, _ := os.ReadFile(path)
	for ref, v := range secrets {
		for _, f := range forms(v) {
			if strings.Contains(o.StderrTail, f) || bytes.Contains(raw, []byte(f)) {
				t.Errorf("secret %s (form %q) is in the receipt", ref, f)
			}
			if bytes.Contains(resJSON, []byte(f)) {
				t.Errorf("secret %s (form %q) is in the result", ref, f)
			}
		}
	}
	if bytes.Contains(resJSON, []byte("crash: the last line")) {
		t.Errorf("stderr entered the result: %s", resJSON)
	}
}

// crashLimits: the stderr tail a receipt keeps of a run stopped at its
// timeout or its output budget is redacted of every secret value, as an
// error's is (DESIGN §10: receipts never hold secret values), and it is
// kept (the run wrote its secrets there just before it was stopped).
func (b *battery) crashLimits(t *testing.T) {
	ex, path := b.open(t)
	for _, tc := range []struct {
		then   string
		status invoke.Status
		limit  func(c *invoke.Call)
	}{
		{"hang", invoke.StatusTimeout, func(c *invoke.Call) { c.Limits.TimeoutMS = 1500 }},
		{"repeat", invoke.StatusOutputLimit, func(c *invoke.Call) { c.Limits.OutputBytes = 256 << 10 }},
	} {
		t.Run(tc.then, func(t *testing.T) {
			c := b.fx.Call("crash", map[string]string{"then": tc.then}, secrets)
			tc.limit(c)
			res := b.run(t, ex, c)
			if res.Status != tc.status {
				t.Fatalf("status %s (%+v), want %s", res.Status, res.Error, tc.status)
			}
			o := recorded(t, path, res)
			if !strings.Contains(o.StderrTail, "[redacted]") {
				t.Errorf("the stderr tail shows no redaction: %q", o.StderrTail)
			}
			for ref, v := range secrets {
				for _, f := range forms(v) {
					if strings.Contains(o.StderrTail, f) {
						t.Errorf("secret %s (form %q) is in the %s receipt's stderr tail", ref, f, tc.status)
					}
				}
			}
		})
	}
	raw, _ := os.ReadFile(path)
	for ref, v := range secrets {
		for _, f := range forms(v) {
			if bytes.Contains(raw, []byte(f)) {
				t.Errorf("secret %s (form %q) is in the ledger", ref, f)
			}
		}
	}
}

func (b *battery) garbage(t *testing.T) {
	ex, path := b.open(t)
	for name, input := range map[string]any{
		"empty":         map[string]string{"stdout": ""},
		"not JSON":      map[string]string{"stdout": "this is not JSON\n"},
		"two documents": map[string]string{"stdout": `{"status":"ok","run_id":"x","result":1,"egress":[]}` + "\n" + `{"status":"ok"}` + "\n"},
		"a JSON array":  map[string]string{"stdout": "[1, 2, 3]\n"},
		// A result otherwise well-formed whose string holds bytes that
		// are not UTF-8 (JSON is UTF-8, RFC 8259 §8.1): the hostile tool
		// writes the lone surrogate of its input as such bytes.
		"not UTF-8": json.RawMessage(`{"stdout":"{\"status\":\"ok\",\"run_id\":\"{run_id}\",\"result\":\"\ud800\",\"egress\":[]}"}`),
		// Error codes are a closed set: one of the provider's own would
		// pass for the executor's (a cancel), or carry a secret past the
		// redaction of the message.
		"an executor's code": map[string]string{"stdout": `{"status":"error","run_id":"{run_id}","error":{"code":"cancelled","message":"the caller cancelled the run"},"egress":[]}`},
		"a secret as code":   map[string]string{"stdout": errorDoc(secrets["acme/beta"], "m")},
	} {
		t.Run(name, func(t *testing.T) {
			res := b.run(t, ex, b.fx.Call("garbage", input, secrets))
			if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeProtocolError {
				t.Fatalf("status %s %+v, want error %s", res.Status, res.Error, invoke.CodeProtocolError)
			}
			o := recorded(t, path, res)
			if o.Status != receipts.StatusError {
				t.Errorf("a protocol failure recorded as %s", o.Status)
			}
			for _, v := range secrets {
				if strings.Contains(res.Error.Message, v) || strings.Contains(o.ErrorMessage, v) || strings.Contains(o.ErrorCode, v) {
					t.Errorf("a secret in the error: %+v / %q %q", res.Error, o.ErrorCode, o.ErrorMessage)
				}
			}
		})
	}
}

// errorDoc is an error result document for the garbage entrypoint (its
// {run_id} filled in by the tool).
func errorDoc(code, message string) string {
	b, _ := json.Marshal(map[string]any{"status": "error", "run_id": "{run_id}", "error": map[string]string{"code": code, "message": message}, "egress": []string{}})
	return string(b)
}

// oversized: a well-formed result within the output budget whose
// message or egress list, as the ledger encodes it (JSON escapes each '<'
// into six bytes), would pass a receipt row's limit. The run must still
// leave its outcome, with those fields cut to what a receipt keeps; an
// outcome that cannot be written leaves the run an orphan intent.
func (b *battery) oversized(t *testing.T) {
	ex, path := b.open(t)
	urls := make([]string, 16000)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://e.example/%05d/<<<<<<<<<<<<<<<<<<<<<<", i)
	}
	egress, _ := json.Marshal(urls)
	for name, tc := range map[string]struct {
		message string
		egress  string
	}{
		"a long message": {strings.Repeat("<", 600<<10), "[]"},
		"many URLs":      {"boom", strings.ReplaceAll(string(egress), `\u003c`, "<")},
		"a long URL":     {"boom", `["https://e.example/` + strings.Repeat("<", 600<<10) + `"]`},
	} {
		t.Run(name, func(t *testing.T) {
			msg, _ := json.Marshal(tc.message)
			out := `{"status":"error","run_id":"{run_id}","error":{"code":"provider_error","message":` +
				strings.ReplaceAll(string(msg), `\u003c`, "<") + `},"egress":` + tc.egress + "}\n"
			res := b.run(t, ex, b.fx.Call("garbage", map[string]string{"stdout": out}, secrets))
			if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != "provider_error" {
				t.Fatalf("status %s %+v, want the provider's error", res.Status, res.Error)
			}
			o := recorded(t, path, res)
			if len(o.ErrorMessage) > invoke.ReceiptMessage+64 || !strings.HasPrefix(o.ErrorMessage, res.Error.Message[:min(64, len(res.Error.Message))]) {
				t.Errorf("the receipt's message: %d bytes: %.80q…", len(o.ErrorMessage), o.ErrorMessage)
			}
			kept := 0
			for _, u := range o.EgressObserved {
				kept += len(u)
			}
			if kept > invoke.ReceiptEgress {
				t.Errorf("the receipt keeps %d bytes of egress in %d URLs", kept, len(o.EgressObserved))
			}
			if len(res.Egress) > 0 && (len(o.EgressObserved) == 0 || o.EgressObservedDropped+len(o.EgressObserved) != len(res.Egress)) {
				t.Errorf("egress: the run saw %d URLs, the receipt keeps %d and says %d were dropped", len(res.Egress), len(o.EgressObserved), o.EgressObservedDropped)
			}
		})
	}
}

func (b *battery) workdir(t *testing.T) {
	ex, path := b.open(t)
	var dirs []string
	for i := 0; i < 2; i++ {
		p, _ := b.probe(t, ex, path, b.fx.Call("probe", map[string]bool{"touch": true}, secrets))
		if len(p.CwdEntries) != 0 {
			t.Errorf("call %d: workdir %s holds %v", i, p.Cwd, p.CwdEntries)
		}
		if p.CwdMode != 0o700 {
			t.Errorf("call %d: workdir mode %o, want 700", i, p.CwdMode)
		}
		dirs = append(dirs, p.Cwd)
	}
	if b.fx.Image != "" {
		// A container's workdir is a path of its own (a tmpfs at the same
		// place each time): the second call found the first one's file
		// gone, which is what fresh means there.
		return
	}
	if dirs[0] == dirs[1] {
		t.Errorf("two calls shared the workdir %s", dirs[0])
	}
	for _, d := range dirs {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("workdir %s is still there after the call (%v)", d, err)
		}
	}
}

// dying is a ledger whose process "dies" between intent and outcome: it
// writes intents and drops outcomes.
type dying struct{ l *receipts.Ledger }

func (d dying) Begin(ctx context.Context, in receipts.Intent) (receipts.Decision, error) {
	return d.l.Begin(ctx, in)
}

func (d dying) Finish(context.Context, receipts.Outcome) error { return nil }

func (b *battery) orphan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	l, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := b.fx.Call("probe", map[string]int{"n": 1}, secrets)
	c.IdempotencyKey = "battery-orphan-key"
	first, err := b.new(t, dying{l}).Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	r := scan(t, path)
	if len(r.Orphans) != 1 || r.Orphans[0].Intent.AttemptID != first.AttemptID {
		t.Fatalf("orphans %+v, want the attempt %s", r.Orphans, first.AttemptID)
	}
	in := r.Orphans[0].Intent
	raw, _ := json.Marshal(json.RawMessage(c.Input))
	if in.IdempotencyKey != c.IdempotencyKey || in.Provider != c.Provider || in.Entrypoint != "probe" ||
		in.ImplementationDigest != c.ImplementationDigest.String() || in.MaterializationDigest != c.MaterializationDigest.String() ||
		in.InputDigest != digest.Sum(raw).String() || in.ProtocolVersion != 1 || in.StartedAt.IsZero() || in.Platform == "" || in.Backend == "" {
		t.Errorf("the orphan intent lacks what reconciling needs: %+v", in)
	}
	// The restarted executor runs the key again, as a new attempt.
	l2, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	second := b.run(t, b.new(t, l2), c)
	if second.AttemptID == first.AttemptID || second.Status != invoke.StatusOK || second.Replayed {
		t.Errorf("after the orphan: %+v", second)
	}
	recorded(t, path, second)
	// And a recorded ok is replayed without spawning.
	third := b.run(t, b.new(t, l2), c)
	if !third.Replayed || third.Status != invoke.StatusOK {
		t.Errorf("the third call was not replayed: %+v", third)
	}
}

// selfSignal: a tool that sends itself a signal with its default
// disposition dies of it as it would on its own, and the run is recorded
// as killed by that signal, exit status 128+N, whatever runs in front of
// the harness (a pid namespace's first process ignores such signals, a
// launcher or a container runtime reports the death as 128+N).
func (b *battery) selfSignal(t *testing.T) {
	ex, path := b.open(t)
	for _, tc := range []struct {
		send string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGABRT", syscall.SIGABRT}, {"abort", syscall.SIGABRT}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(tc.send, func(t *testing.T) {
			res := b.run(t, ex, b.fx.Call("signal", map[string]string{"signal": tc.send}, secrets))
			want := fmt.Sprintf("killed by %s ", unix.SignalName(tc.sig))
			if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeExited ||
				res.ExitCode != 128+int(tc.sig) || !strings.Contains(res.Error.Message, want) {
				t.Fatalf("status %s exit %d %+v %s, want error %s exit %d saying %q", res.Status, res.ExitCode, res.Error, res.Value,
					invoke.CodeExited, 128+int(tc.sig), want)
			}
			if o := recorded(t, path, res); o.ErrorMessage != res.Error.Message {
				t.Errorf("the receipt says %q, the result %q", o.ErrorMessage, res.Error.Message)
			}
		})
	}
}

// reaped: an orphan the tool leaves behind is reaped once it exits, not
// left a zombie (against a container's pids limit) by a first process of
// the pid namespace that reaps nothing.
func (b *battery) reaped(t *testing.T) {
	ex, path := b.open(t)
	res := b.run(t, ex, b.fx.Call("orphan", nil, secrets))
	if res.Status != invoke.StatusOK {
		t.Fatalf("status %s %+v", res.Status, res.Error)
	}
	recorded(t, path, res)
	var v struct {
		Reaped bool `json:"reaped"`
		PID    int  `json:"pid"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Reaped {
		t.Errorf("the orphan (pid %d in the run) was not reaped within 3 s: a zombie", v.PID)
	}
}

// channelClosed: a tool that closes every descriptor above 2, as
// daemonizing libraries do, closes the harness's result channel with them:
// the run is a protocol_error whose message says so (it was
// harness_exited, exit 1, with the reason only in the stderr tail).
func (b *battery) channelClosed(t *testing.T) {
	ex, path := b.open(t)
	res := b.run(t, ex, b.fx.Call("closefds", nil, secrets))
	if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeProtocolError ||
		!strings.Contains(res.Error.Message, "closed the harness's result channel") {
		t.Fatalf("status %s exit %d %+v, want %s saying the result channel was closed", res.Status, res.ExitCode, res.Error, invoke.CodeProtocolError)
	}
	if o := recorded(t, path, res); !strings.Contains(o.StderrTail, "closed the result channel") {
		t.Errorf("the stderr tail lacks the harness's line: %q", o.StderrTail)
	}
}

// startup: code a dependency's .pth file runs at interpreter start (as
// site processes .pth files) is provider code that runs before any of the
// harness's own would under `python -I -m`: what it prints, writes on fd 1
// itself, or forges there as a result must go to stderr, never into the
// result (the run was a protocol_error blamed on the harness). One that
// raises is reported by site on stderr and the run goes on, as any start
// would; one that exits ends the interpreter's start, harness_exited
// (SystemExit in the stderr tail), one that calls os._exit is a
// protocol_error (no result): each a clear outcome, not a hang.
func (b *battery) startup(t *testing.T) {
	ex, path := b.open(t)
	var tail string
	run := func(t *testing.T, modes string) *invoke.Result {
		t.Helper()
		c := b.fx.Call("startup", nil, secrets)
		c.Inject = append(c.Inject, "ACME_STARTUP="+modes)
		res := b.run(t, ex, c)
		tail = recorded(t, path, res).StderrTail
		return res
	}
	for _, modes := range []string{"print,write", "forge", "raise", ""} {
		t.Run("mode="+modes, func(t *testing.T) {
			res := run(t, modes)
			if res.Status != invoke.StatusOK {
				t.Fatalf("status %s %+v (exit %d, %d bytes on stdout), want ok: the .pth's %q reached the result channel",
					res.Status, res.Error, res.ExitCode, res.StdoutBytes, modes)
			}
			var got struct {
				PthRan []string `json:"pth_ran"`
			}
			if err := json.Unmarshal(res.Value, &got); err != nil {
				t.Fatalf("result %s: %v", res.Value, err)
			}
			if len(got.PthRan) == 0 {
				t.Errorf("acme_startup.pth did not run: %s", res.Value)
			}
			for _, fd1 := range got.PthRan {
				if fd1 != "stderr" {
					t.Errorf("when acme_startup.pth ran, fd 1 was %s: the protocol channel was not yet off fd 1 (%q)", fd1, got.PthRan)
					break
				}
			}
			if modes == "print,write" && res.StderrBytes < int64(len("acme-startup: printed at interpreter start\nacme-startup: written on fd 1 at interpreter start\n")) {
				t.Errorf("only %d bytes on stderr: what the .pth printed went elsewhere", res.StderrBytes)
			}
		})
	}
	t.Run("old runtime", func(t *testing.T) {
		// A runtime before python.HandoffVersion does not take the channel
		// from a variable (an older image's cruxshim does not know the
		// flag): it gets the channel on fd 1 as before, which is what the
		// .pth sees then; a quiet start still runs.
		c := b.fx.Call("startup", nil, secrets)
		c.Runtime = "0.1.0"
		res := b.run(t, ex, c)
		recorded(t, path, res)
		if res.Status != invoke.StatusOK {
			t.Fatalf("status %s %+v (exit %d)", res.Status, res.Error, res.ExitCode)
		}
		var got struct {
			PthRan []string `json:"pth_ran"`
		}
		if err := json.Unmarshal(res.Value, &got); err != nil {
			t.Fatalf("result %s: %v", res.Value, err)
		}
		if len(got.PthRan) == 0 || slices.Contains(got.PthRan, "stderr") {
			t.Errorf("when acme_startup.pth ran, fd 1 was %q: want the channel (old wiring)", got.PthRan)
		}
	})
	t.Run("mode=exit", func(t *testing.T) {
		// sys.exit in a .pth file ends the interpreter's start before the
		// harness runs (CPython: "Fatal Python error: init_import_site",
		// exit 1): the harness exited, the traceback in the stderr tail.
		res := run(t, "exit")
		if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeExited || res.ExitCode != 1 {
			t.Fatalf("status %s %+v (exit %d), want error %s, exit 1", res.Status, res.Error, res.ExitCode, invoke.CodeExited)
		}
		if !strings.Contains(tail, "SystemExit: 7") {
			t.Errorf("the stderr tail does not say what ended the start: %q", tail)
		}
	})
	t.Run("mode=osexit", func(t *testing.T) {
		res := run(t, "osexit")
		if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeProtocolError {
			t.Fatalf("status %s %+v (exit %d), want error %s (no result)", res.Status, res.Error, res.ExitCode, invoke.CodeProtocolError)
		}
	})
}

package invoke_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	pyrt "github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// python is the interpreter the fixture env is built on: Debian's, which
// every user can read (uid 65534 runs it too).
const python = "/usr/bin/python3.11"

var (
	fx     invoketest.Fixtures
	fxErr  error
	fxBase string
)

func TestMain(m *testing.M) {
	switch os.Getenv("CRUXPROV_INVOKE_CHILD") {
	case "":
	case "killed":
		os.Exit(killedMain())
	case "nsrefused":
		os.Exit(nsRefusedMain())
	case "nosysadmin":
		os.Exit(noSysAdminMain())
	case "cloexec":
		os.Exit(cloexecMain())
	default:
		os.Exit(childMain())
	}
	code := func() int {
		if _, err := os.Stat(python); err != nil {
			fxErr = fmt.Errorf("no %s here", python)
			return m.Run()
		}
		base, err := os.MkdirTemp("", "cruxprov-invoke-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fxBase = base
		defer removeTree(base)
		os.Chmod(base, 0o755)
		fx, fxErr = invoketest.BuildLocal(context.Background(), base, python)
		return m.Run()
	}()
	imagetest.Cleanup() // the cruxshim BenchmarkInvoke built, if any
	os.Exit(code)
}

func removeTree(dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

func fixture(t testing.TB) invoketest.Fixtures {
	t.Helper()
	if fxErr != nil {
		t.Skipf("no fixture env: %v", fxErr)
	}
	return fx
}

func TestConformance(t *testing.T) {
	f := fixture(t)
	invoketest.Run(t, func(t *testing.T, l invoke.Ledger) invoke.Executor {
		return &invoke.Subprocess{Ledger: l, Grace: 500_000_000, WorkdirParent: t.TempDir()}
	}, f)
}

func openLedger(t *testing.T) (*receipts.Ledger, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

// TestRefusals: each refusal spawns nothing, and the ledger records it as
// refused when the attempt got that far.
func TestRefusals(t *testing.T) {
	f := fixture(t)
	ok := map[string]string{"acme/alpha": "a", "acme/beta": "b"}
	cases := []struct {
		name   string
		edit   func(c *invoke.Call)
		code   refusal.Code
		ledger bool
	}{
		{"verify fails", func(c *invoke.Call) {
			c.Verify = func(context.Context) error { return refusal.New(refusal.EnvDrift, "drifted") }
		}, refusal.EnvDrift, true},
		{"verify fails with a plain error", func(c *invoke.Call) {
			c.Verify = func(context.Context) error { return errors.New("boom") }
		}, refusal.EnvDrift, true},
		{"runtime missing", func(c *invoke.Call) { c.Env = t.TempDir() }, refusal.RuntimeMissing, true},
		{"python link escapes", func(c *invoke.Call) { c.Python = "../../usr/bin/python3" }, refusal.SealInvalid, true},
		{"secret missing", func(c *invoke.Call) {
			c.Resolve = func(_ context.Context, ref string) (string, error) {
				if ref == "acme/beta" {
					return "", errors.New("not given")
				}
				return "x", nil
			}
		}, refusal.SecretUnresolved, true},
		{"no resolver", func(c *invoke.Call) { c.Resolve = nil }, refusal.SecretUnresolved, true},
		{"bundle too large", func(c *invoke.Call) {
			c.Resolve = func(context.Context, string) (string, error) { return strings.Repeat("x", 40<<10), nil }
		}, refusal.SecretBundleTooLarge, true},
		// A resolver that knows a value cannot fit (a file over 64 KiB)
		// says so: not "has no value", whose advice is to supply it.
		{"resolver: value too large", func(c *invoke.Call) {
			c.Resolve = func(context.Context, string) (string, error) {
				return "", refusal.New(refusal.SecretBundleTooLarge, "secret file over 64 KiB")
			}
		}, refusal.SecretBundleTooLarge, true},
		{"input not JSON", func(c *invoke.Call) { c.Input = json.RawMessage(`{"a":`) }, refusal.InputInvalid, false},
		{"input nested deeper than the harness reads", func(c *invoke.Call) {
			c.Input = json.RawMessage(strings.Repeat(`{"a":[`, 300) + `"]}[{"` + strings.Repeat(`]}`, 300))
		}, refusal.InputInvalid, false},
		// CPython reads neither: its json stops at 4300 digits (the run
		// ended protocol_error, the harness unable to read even its run_id)
		// and makes 1e400 an infinity no result can carry.
		{"input integer longer than the harness reads", func(c *invoke.Call) {
			c.Input = json.RawMessage(`{"n":[-` + strings.Repeat("7", invoke.MaxInputIntDigits+1) + `]}`)
		}, refusal.InputInvalid, false},
		{"input number beyond a float64", func(c *invoke.Call) { c.Input = json.RawMessage(`{"x":1e400}`) }, refusal.InputInvalid, false},
		{"input with a key twice", func(c *invoke.Call) { c.Input = json.RawMessage(`{"x":1,"x":2}`) }, refusal.InputInvalid, false},
		// encoding/json's Compact passes bytes that are not UTF-8 inside a
		// string; the harness could not decode the request, nor its run_id,
		// and the run was recorded protocol_error, blaming the harness.
		{"input not UTF-8", func(c *invoke.Call) { c.Input = json.RawMessage("{\"x\":\"\xff\"}") }, refusal.InputInvalid, false},
		// The run's working directory cannot be made (WorkdirParent is a
		// file, below): the receipt names invoke_failed, a code of the
		// closed set, as every receipt's error_code is.
		{"no working directory", func(*invoke.Call) {}, refusal.InvokeFailed, true},
	}
	// What a refusal's message says, where a case checks it: runtime
	// missing named the module and its spelling of the distribution, and
	// no next step.
	says := map[string]string{
		"runtime missing": "which the provider runtime's wheel (cruxible-provider-runtime) installs: add that wheel to the provider's lock",
	}
	notDir := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(notDir, nil, 0o644)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, path := openLedger(t)
			work := t.TempDir()
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: work}
			if tc.code == refusal.InvokeFailed {
				ex.WorkdirParent = notDir
			}
			c := f.Call("probe", nil, ok)
			tc.edit(c)
			res, runErr := ex.Run(context.Background(), c)
			if res != nil || !errors.Is(runErr, tc.code) {
				t.Fatalf("Run = %+v, %v; want refusal %s", res, runErr, tc.code)
			}
			if !strings.Contains(runErr.Error(), says[tc.name]) {
				t.Errorf("%v does not say %q", runErr, says[tc.name])
			}
			if ents, _ := os.ReadDir(work); len(ents) != 0 {
				t.Errorf("a refused run made a workdir: %v", ents)
			}
			r, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var rr *invoke.RecordedRefusal
			if !tc.ledger {
				if len(r.Attempts) != 0 {
					t.Errorf("a call refused before its intent left %+v", r.Attempts)
				}
				if errors.As(runErr, &rr) {
					t.Errorf("a refusal the ledger has no receipt of names attempt %s", rr.AttemptID)
				}
				return
			}
			if len(r.Attempts) != 1 || r.Attempts[0].Outcome == nil || r.Attempts[0].Outcome.Status != receipts.StatusRefused ||
				r.Attempts[0].Outcome.ErrorCode != string(tc.code) {
				t.Errorf("ledger: %+v", r.Attempts)
			} else if !errors.As(runErr, &rr) || rr.AttemptID != r.Attempts[0].Intent.AttemptID {
				t.Errorf("the refusal %v does not name its receipt, attempt %s", runErr, r.Attempts[0].Intent.AttemptID)
			}
		})
	}
}

// TestInputNumbersTheHarnessReads: numbers at the limits pass, and reach
// the provider as they were written (strings that look like numbers too).
func TestInputNumbersTheHarnessReads(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	in := `[-` + strings.Repeat("9", invoke.MaxInputIntDigits) + `,1e308,1e-400,1.` + strings.Repeat("5", 5000) + `,"1e400"]`
	res, err := ex.Run(context.Background(), f.Call("probe", json.RawMessage(in), map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil || res.Status != invoke.StatusOK {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

func TestIdempotencyConflict(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	s := map[string]string{"acme/alpha": "a", "acme/beta": "b"}
	c := f.Call("probe", 1, s)
	c.IdempotencyKey = "k"
	if _, err := ex.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	c = f.Call("probe", 2, s)
	c.IdempotencyKey = "k"
	if _, err := ex.Run(context.Background(), c); !errors.Is(err, refusal.IdempotencyConflict) {
		t.Fatalf("err %v, want idempotency_conflict", err)
	}
}

func TestEffectiveBudgets(t *testing.T) {
	def := invoke.Budgets{TimeoutMS: 30000, OutputBytes: 1 << 20}
	for _, tc := range []struct {
		name                   string
		manifest, caller, want invoke.Budgets
	}{
		{"manifest only", invoke.Budgets{TimeoutMS: 5000, OutputBytes: 100}, invoke.Budgets{}, invoke.Budgets{TimeoutMS: 5000, OutputBytes: 100}},
		{"caller lowers", invoke.Budgets{TimeoutMS: 5000, OutputBytes: 100}, invoke.Budgets{TimeoutMS: 10, OutputBytes: 50}, invoke.Budgets{TimeoutMS: 10, OutputBytes: 50}},
		{"caller cannot raise", invoke.Budgets{TimeoutMS: 5000, OutputBytes: 100}, invoke.Budgets{TimeoutMS: 9999999, OutputBytes: 1 << 40}, invoke.Budgets{TimeoutMS: 5000, OutputBytes: 100}},
		{"neither: defaults", invoke.Budgets{}, invoke.Budgets{}, def},
		{"caller only", invoke.Budgets{}, invoke.Budgets{TimeoutMS: 7}, invoke.Budgets{TimeoutMS: 7, OutputBytes: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := invoke.Effective(tc.manifest, tc.caller, def); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAsUnprivilegedExecutor runs an invocation end to end as uid 65534,
// which can only read the store: the test binary re-executed under setpriv.
func TestAsUnprivilegedExecutor(t *testing.T) {
	f := fixture(t)
	asuser.Require(t, "switch to uid 65534")
	work := asuser.Dir(t, "cruxprov-invoke-nobody-")
	os.Chown(work, 65534, 65534)
	bin := asuser.CopySelf(t, work)
	fxj, _ := json.Marshal(f)
	cmd := asuser.Command(65534, 65534, bin, "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_INVOKE_CHILD=1", "CRUXPROV_INVOKE_FIXTURES=" + string(fxj), "CRUXPROV_INVOKE_WORK=" + work, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if rep.UID != 65534 || rep.Status != "ok" || rep.Ledger != "ok" || !rep.WriteRefused {
		t.Errorf("as uid 65534: %+v", rep)
	}
}

type childReport struct {
	UID          int    `json:"uid"`
	Status       string `json:"status"`
	Ledger       string `json:"ledger"`
	WriteRefused bool   `json:"write_refused"`
	Err          string `json:"err,omitempty"`
}

// childLedger is a test child's start: the fixtures and the work
// directory its parent passed, and a ledger at rel under that directory.
func childLedger(rel string) (invoketest.Fixtures, string, *receipts.Ledger, error) {
	var f invoketest.Fixtures
	if err := json.Unmarshal([]byte(os.Getenv("CRUXPROV_INVOKE_FIXTURES")), &f); err != nil {
		return f, "", nil, err
	}
	work := os.Getenv("CRUXPROV_INVOKE_WORK")
	l, err := receipts.Open(context.Background(), filepath.Join(work, rel), receipts.Options{})
	return f, work, l, err
}

// childMain is the unprivileged executor: it verifies and runs probe with
// a ledger in its own directory, and reports.
func childMain() int {
	rep := childReport{UID: os.Getuid()}
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	ctx := context.Background()
	f, work, l, err := childLedger(filepath.Join("state", "receipts.jsonl"))
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer l.Close()
	// It can only read the store.
	if err := os.WriteFile(filepath.Join(f.Env, "planted"), nil, 0o644); err != nil {
		rep.WriteRefused = true
	}
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: work}
	res, err := ex.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	rep.Status = string(res.Status)
	r, err := receipts.Scan(ctx, []string{l.Path()}, receipts.ScanOptions{})
	if err == nil && len(r.Attempts) == 1 && r.Attempts[0].Outcome != nil && r.Attempts[0].Outcome.Status == "ok" {
		rep.Ledger = "ok"
	}
	return 0
}

// TestBwrap runs the probe under the bubblewrap preset: no network, only
// the env, the interpreter's files and the workdir visible.
func TestBwrap(t *testing.T) {
	f := fixture(t)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	if out, err := exec.Command(bwrap, "--unshare-net", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot run here: %v %s", err, out)
	}
	out, err := exec.Command(python, "-I", "-c", "import sys, sysconfig; print(sysconfig.get_paths()['stdlib']); print(sysconfig.get_config_var('LIBDIR'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(python)
	ro := append([]string{real}, strings.Fields(string(out))...)
	if _, err := os.Stat("/usr/lib64"); err == nil {
		ro = append(ro, "/usr/lib64")
	}
	// BwrapFor derives as much from what a seal records of the
	// interpreter, without running it.
	version, err := exec.Command(python, "-I", "-c", "import platform; print(platform.python_version())").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]invoke.Bwrap{
		"ReadOnly": {Path: bwrap, ReadOnly: ro},
		"BwrapFor": invoke.BwrapFor(bwrap, real, strings.TrimSpace(string(version)), ""),
	} {
		t.Run(name, func(t *testing.T) { bwrapProbe(t, f, b) })
	}
	// The whole battery, sandboxed: bwrap runs in front of the harness.
	b := invoke.BwrapFor(bwrap, real, strings.TrimSpace(string(version)), "")
	t.Run("Battery", func(t *testing.T) {
		f := f
		f.RuntimeEnv = append(slices.Clip(f.RuntimeEnv), "PWD") // bwrap --chdir sets it (to the workdir)
		invoketest.Run(t, func(t *testing.T, l invoke.Ledger) invoke.Executor {
			return &invoke.Subprocess{Ledger: l, Grace: 500_000_000, WorkdirParent: t.TempDir(), Sandbox: b}
		}, f)
	})
}

// TestSelfSignalAlike: a tool that signals itself is recorded alike with
// and without the pid namespace (where the harness would be its first
// process) and behind bwrap: killed by the signal, exit status 128+N.
// Before, in the namespace, its SIGTERM and SIGKILL did nothing and
// abort() ended in SIGSEGV; unsandboxed it was killed (exit -1); behind
// bwrap it "exited 134".
func TestSelfSignalAlike(t *testing.T) {
	f := fixture(t)
	executors := map[string]*invoke.Subprocess{"namespaces": {}, "no namespaces": {NoNamespaces: true}}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		real, _ := filepath.EvalSymlinks(python)
		executors["bwrap"] = &invoke.Subprocess{Sandbox: invoke.BwrapFor(bwrap, real, "3.11", "")}
	}
	for _, send := range []string{"SIGTERM", "abort", "SIGKILL"} {
		msgs := map[string]string{}
		for name, ex := range executors {
			l, _ := openLedger(t)
			ex := *ex
			ex.Ledger, ex.WorkdirParent = l, t.TempDir()
			res, err := ex.Run(context.Background(), f.Call("signal", map[string]string{"signal": send}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Error == nil {
				t.Fatalf("%s %s: %s %s", name, send, res.Status, res.Value)
			}
			msgs[name] = fmt.Sprintf("%s %d %s", res.Error.Code, res.ExitCode, res.Error.Message)
		}
		for name, m := range msgs {
			if m != msgs["no namespaces"] || !strings.Contains(m, "killed by SIG") {
				t.Errorf("%s: %s: %q; without namespaces: %q", send, name, m, msgs["no namespaces"])
			}
		}
	}
}

// TestHarnessBehindShellInit: in the executor's pid namespace the harness
// runs behind a shell as the namespace's first process, not as that
// process forking an init in front of itself (~50 ms of copy-on-write
// faults a run on this VM, against ~2 ms for the shell): its parent is
// the shell, and the orphans of the run are still reaped.
func TestHarnessBehindShellInit(t *testing.T) {
	f := fixture(t)
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh: the harness forks its own init")
	}
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	res, err := ex.Run(context.Background(), f.Call("orphan", nil, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"}))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Reaped bool   `json:"reaped"`
		Parent string `json:"parent"`
	}
	if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &v) != nil {
		t.Fatalf("%+v %+v %s", res, res.Error, res.Value)
	}
	if !v.Reaped || v.Parent == "" || strings.HasPrefix(v.Parent, "python") {
		t.Errorf("reaped %v, the harness's parent %q; want the orphan reaped behind a shell", v.Reaped, v.Parent)
	}
}

// TestBundleTooLargeSaysWhatToDo: a bundle over 64 KiB is refused naming
// its size, the limit and what to do. Walking docs/executor.md's Go API
// with a resolver returning a 70,000-byte value, the refusal said only
// "the secret bundle is 70021 bytes, over 65536".
func TestBundleTooLargeSaysWhatToDo(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	c := f.Call("probe", nil, nil)
	c.Resolve = func(context.Context, string) (string, error) { return strings.Repeat("x", 40<<10), nil }
	res, err := ex.Run(context.Background(), c)
	if res != nil || !errors.Is(err, refusal.SecretBundleTooLarge) {
		t.Fatalf("got %+v, %v; want secret_bundle_too_large", res, err)
	}
	if !strings.Contains(err.Error(), "over the 65536 bytes it may hold: give the provider smaller or fewer secret values") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
}

// TestSandboxNotInstalled: a sandbox launcher that is not installed
// refuses the run invoke_failed saying what to do: install it, or run
// without the sandbox. Walking docs/executor.md's bwrap section with a PATH
// that had no bwrap, `cruxprov run --sandbox bwrap` said only "cannot
// start bwrap: exec: "bwrap": executable file not found in $PATH".
func TestSandboxNotInstalled(t *testing.T) {
	f := fixture(t)
	for name, sb := range map[string]invoke.Sandbox{
		"not on PATH":  invoke.Bwrap{Path: "cruxprov-test-no-such-bwrap"},
		"no such path": invoke.Bwrap{Path: filepath.Join(t.TempDir(), "bwrap")},
	} {
		t.Run(name, func(t *testing.T) {
			l, _ := openLedger(t)
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Sandbox: sb}
			res, err := ex.Run(context.Background(), f.Call("probe", map[string]bool{}, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
			if res != nil || !errors.Is(err, refusal.InvokeFailed) {
				t.Fatalf("got %+v, %v; want invoke_failed, nothing run", res, err)
			}
			for _, s := range []string{"is not installed here: install it (bwrap: the package bubblewrap", "or run without the sandbox; it cannot be started: "} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the refusal does not say %q: %v", s, err)
				}
			}
		})
	}
}

func bwrapProbe(t *testing.T, f invoketest.Fixtures, b invoke.Bwrap) {
	l, path := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Sandbox: b}
	res, err := ex.Run(context.Background(), f.Call("probe", map[string]bool{"touch": true, "escape": true}, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusOK {
		r, _ := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
		t.Fatalf("%+v %+v\n%+v", res, res.Error, r.Attempts[0].Outcome)
	}
	var p struct {
		RootEntries []string `json:"root_entries"`
		Interfaces  []string `json:"interfaces"`
		Secrets     map[string]string
		Escape      struct {
			CapEff      string `json:"cap_eff"`
			ProcPids    int    `json:"proc_pids"`
			RemountEnv  string `json:"remount_env"`
			SysctlWrite string `json:"sysctl_write"`
		}
	}
	if err := json.Unmarshal(res.Value, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Interfaces) != 1 || p.Interfaces[0] != "lo" {
		t.Errorf("network interfaces %v, want only lo", p.Interfaces)
	}
	for _, e := range p.RootEntries {
		switch e {
		case "usr", "tmp", "proc", "dev", "lib", "lib64", "bin", "sbin", "lib32", "libx32":
		default:
			t.Errorf("/%s is visible in the sandbox", e)
		}
	}
	if len(p.Secrets) != 2 {
		t.Errorf("secrets %v", p.Secrets)
	}
	// A review found, as root: every capability kept (bwrap started by
	// root keeps them), the env's read-only bind remounted read-write and
	// written, kernel.core_pattern writable; and, as anyone, the host's
	// /proc (every process and its command line).
	if e := p.Escape; e.CapEff != "0000000000000000" || e.RemountEnv == "ok" || e.SysctlWrite == "ok" || e.ProcPids < 1 || e.ProcPids > 4 {
		t.Errorf("in the sandbox (uid %d): %+v; want no capability, the remount and the sysctl write refused, a /proc of its own few processes", os.Geteuid(), e)
	}
}

// TestRefusedRunUnderKey: a run refused before it starts is recorded as
// refused whatever its idempotency key has on record, and does not use the
// key: it is never shown as a replay, never dropped as a conflict, and a
// later call with the key is decided as if it had not happened.
func TestRefusedRunUnderKey(t *testing.T) {
	f := fixture(t)
	s := map[string]string{"acme/alpha": "a", "acme/beta": "b"}
	drift := func(context.Context) error { return refusal.New(refusal.EnvDrift, "drifted") }
	call := func(input int, verify func(context.Context) error) *invoke.Call {
		c := f.Call("probe", input, s)
		c.IdempotencyKey = "k"
		if verify != nil {
			c.Verify = verify
		}
		return c
	}
	cases := []struct {
		name   string
		before []*invoke.Call // run first, each must succeed
		after  *invoke.Call   // run after the refusal
		// want of the call after: replayed, or a conflict, or a fresh ok
		replayed, conflict bool
	}{
		{"an ok is on record", []*invoke.Call{call(1, nil)}, call(1, nil), true, false},
		{"the key was first used with another input", []*invoke.Call{call(2, nil)}, call(1, nil), false, true},
		{"first use of the key", nil, call(2, nil), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, path := openLedger(t)
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
			ctx := context.Background()
			var first string // the attempt a replay returns the outcome of
			for _, c := range tc.before {
				res, err := ex.Run(ctx, c)
				if err != nil || res.Status != invoke.StatusOK {
					t.Fatalf("before: %+v %v", res, err)
				}
				if first == "" {
					first = res.AttemptID
				}
			}
			res, err := ex.Run(ctx, call(1, drift))
			if res != nil || !errors.Is(err, refusal.EnvDrift) {
				t.Fatalf("refused run = %+v, %v; want env_drift", res, err)
			}
			r, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last := r.Attempts[len(r.Attempts)-1]
			if len(r.Attempts) != len(tc.before)+1 || last.Outcome == nil || last.Outcome.Status != receipts.StatusRefused ||
				last.Outcome.Replayed || last.Outcome.ErrorCode != string(refusal.EnvDrift) || !strings.Contains(last.Outcome.ErrorMessage, `"k"`) {
				t.Fatalf("the refused run's receipt: %+v %+v", last.Intent, last.Outcome)
			}
			res, err = ex.Run(ctx, tc.after)
			switch {
			case tc.conflict:
				if !errors.Is(err, refusal.IdempotencyConflict) {
					t.Fatalf("after: %+v %v, want idempotency_conflict", res, err)
				}
			case err != nil || res.Status != invoke.StatusOK || res.Replayed != tc.replayed:
				t.Fatalf("after: %+v %v, want ok replayed=%v", res, err, tc.replayed)
			case tc.replayed && (res.ReplayOf != first || first == "" || res.AttemptID == first):
				// A replay names the attempt that ran, as its receipt's
				// replay_of does (the CLI shows that receipt).
				t.Fatalf("after: a replay of %q (its own attempt %s), want of %s", res.ReplayOf, res.AttemptID, first)
			}
		})
	}
}

// TestExecutorKilled: an executor killed with SIGKILL mid-run (it cannot
// signal anything then) takes its run with it: the harness gets SIGKILL
// when its parent dies, and the kernel kills the rest of its pid
// namespace, so nothing runs on past the timeout the dead executor would
// have enforced, and a retry under the same key (receipts.md) does not
// run beside the orphan.
func TestExecutorKilled(t *testing.T) {
	f := fixture(t)
	token := fmt.Sprintf("cruxprov-killed-%d-%d", os.Getpid(), time.Now().UnixNano())
	fxj, _ := json.Marshal(f)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	workParent := t.TempDir()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_INVOKE_CHILD=killed", "CRUXPROV_INVOKE_FIXTURES=" + string(fxj),
		"CRUXPROV_INVOKE_WORK=" + workParent, "CRUXPROV_INVOKE_TOKEN=" + token, "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range invoketest.ProcsWith(token) {
			// the harness, whose argv has no token, is the child's parent
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil {
				if i := bytes.LastIndexByte(st, ')'); i > 0 {
					if f := strings.Fields(string(st[i+1:])); len(f) > 1 {
						if pp, _ := strconv.Atoi(f[1]); pp > 1 {
							syscall.Kill(pp, syscall.SIGKILL)
						}
					}
				}
			}
			syscall.Kill(p, syscall.SIGKILL)
		}
	}()
	// Wait for the run's processes: the harness, the tool's child and its
	// setsid() grandchild.
	// One scan decides: a second one could miss a process the first saw
	// (the tool's forks come and go while it sets up).
	deadline := time.Now().Add(20 * time.Second)
	n := len(invoketest.ProcsWith(token))
	for n < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = len(invoketest.ProcsWith(token))
	}
	if n < 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("saw %d of the run's processes (the test proves nothing)", n)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline = time.Now().Add(3 * time.Second)
	for len(invoketest.ProcsWith(token)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := invoketest.ProcsWith(token); len(left) > 0 {
		t.Errorf("processes of the run outlived the executor killed with SIGKILL: %v", left)
	}

	// The killed executor left its run's working directory. The next run
	// in that parent removes it once it is older than a run's first
	// moment, and leaves one a live run holds, and a young one.
	left, _ := filepath.Glob(filepath.Join(workParent, "cruxprov-run-*"))
	if len(left) != 1 {
		t.Fatalf("the killed run's working directory: %v", left)
	}
	old := time.Now().Add(-2 * time.Minute)
	os.Mkdir(filepath.Join(left[0], "ro"), 0o500)
	live, young := filepath.Join(workParent, "cruxprov-run-live"), filepath.Join(workParent, "cruxprov-run-young")
	os.Mkdir(live, 0o700)
	os.Mkdir(young, 0o700)
	held, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{left[0], live} {
		os.Chtimes(p, old, old)
	}
	ex := &invoke.Subprocess{WorkdirParent: workParent}
	if res, err := ex.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})); err != nil || res.Status != invoke.StatusOK {
		t.Fatalf("the next run: %+v %v", res, err)
	}
	for p, want := range map[string]bool{left[0]: false, live: true, young: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// killedMain is the executor TestExecutorKilled kills: it runs acme-hostile's
// term (a child and a setsid() grandchild, SIGTERM ignored) with a long
// timeout, and is killed before the run ends.
func killedMain() int {
	var f invoketest.Fixtures
	if err := json.Unmarshal([]byte(os.Getenv("CRUXPROV_INVOKE_FIXTURES")), &f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ex := &invoke.Subprocess{WorkdirParent: os.Getenv("CRUXPROV_INVOKE_WORK")}
	c := f.Call("term", map[string]string{"token": os.Getenv("CRUXPROV_INVOKE_TOKEN")}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Limits.TimeoutMS = 60_000
	_, err := ex.Run(context.Background(), c)
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// TestBwrapInterpreterOutsideBin: the bubblewrap preset of an interpreter
// whose real path is not PREFIX/bin (a build unpacked under /opt, its
// stdlib at /opt/py/lib/pythonX.Y beside the executable) binds the stdlib
// CPython itself finds (the first lib/pythonX.Y/os.py in a directory
// above the executable, as getpath searches), and the run answers. Before,
// only PREFIX/bin's parent was tried: nothing of the stdlib was visible,
// and the run ended "harness exited 1" with Python's fatal
// "No module named 'encodings'" in the stderr tail. An interpreter whose
// stdlib is in no directory above it (a compiled-in prefix) is refused
// invoke_failed before anything runs, saying what to do.
func TestBwrapInterpreterOutsideBin(t *testing.T) {
	fixture(t)
	bwrap, real, version, stdlib, xy := bwrapPython(t)
	base := bwrapBase(t, "opt")
	// /opt/py/python3.X with /opt/py/lib/python3.X: no bin directory.
	opt := filepath.Join(base, "opt", "py")
	if err := os.MkdirAll(filepath.Join(opt, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(opt, "python"+xy)
	if err := os.WriteFile(py, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stdlib, filepath.Join(opt, "lib", "python"+xy)); err != nil {
		t.Fatal(err)
	}
	f2, err := invoketest.BuildLocal(context.Background(), filepath.Join(base, "fx"), py)
	if err != nil {
		t.Fatal(err)
	}
	l, path := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Sandbox: invoke.BwrapFor(bwrap, py, version, "")}
	res, err := ex.Run(context.Background(), f2.Call("probe", nil, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusOK {
		r, _ := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
		t.Fatalf("%s %+v; stderr tail: %s", res.Status, res.Error, r.Attempts[0].Outcome.StderrTail)
	}

	// No stdlib above the interpreter for this version: refused, with
	// nothing spawned.
	ex.Sandbox = invoke.BwrapFor(bwrap, py, "3.99.0", "")
	res, err = ex.Run(context.Background(), f2.Call("probe", nil, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"}))
	if refusal.CodeOf(err) != refusal.InvokeFailed || res != nil || !strings.Contains(err.Error(), "lib/python3.99") {
		t.Fatalf("an interpreter without a stdlib above it: %+v, %v; want %s naming lib/python3.99", res, err, refusal.InvokeFailed)
	}
}

// TestResultChannelReused: a tool that closes the harness's result channel
// and then opens files, one of which takes the channel's number, does not
// get the result written into its file; the run is a protocol_error saying
// the channel was closed. Before, the harness wrote the result line into
// the provider's file, exited 0, and the run was "wrote no result".
func TestResultChannelReused(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	res, err := ex.Run(context.Background(), f.Call("closefds", map[string]string{"reopen": dir}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Code != invoke.CodeProtocolError || !strings.Contains(res.Error.Message, "closed the harness's result channel") {
		t.Errorf("%s exit %d %+v, want %s saying the channel was closed", res.Status, res.ExitCode, res.Error, invoke.CodeProtocolError)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 8 {
		t.Fatalf("the tool opened %d files, want 8", len(ents))
	}
	for _, e := range ents {
		if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); len(b) > 0 {
			t.Errorf("the harness wrote into the provider's file %s: %q", e.Name(), b)
		}
	}
}

// TestBwrapExtensionRunpath: the bubblewrap preset shows a run the
// directories the interpreter's extension modules find their libraries in
// through their run paths, as a conda build's lib-dynload/_ssl finds
// libssl in PREFIX/lib through $ORIGIN/../..: a stdlib module with such a
// library loads inside the sandbox. Before, only PREFIX/lib/pythonX.Y was
// bound, and the module failed "cannot open shared object file".
func TestBwrapExtensionRunpath(t *testing.T) {
	bwrap, real, version, stdlib, xy := bwrapPython(t)
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the extension module with (apt-get install gcc)")
	}
	base := bwrapBase(t, "conda")
	// PREFIX/bin/pythonX.Y, its stdlib PREFIX/lib/pythonX.Y (the host's,
	// entry by entry), and in its lib-dynload a module that needs
	// PREFIX/lib/libcruxdep.so through the run path $ORIGIN/../..
	prefix := filepath.Join(base, "conda")
	lib := filepath.Join(prefix, "lib")
	std := filepath.Join(lib, "python"+xy)
	dyn := filepath.Join(std, "lib-dynload")
	for _, d := range []string{filepath.Join(prefix, "bin"), dyn} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(prefix, "bin", "python"+xy)
	if err := os.WriteFile(py, b, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(from, to string) {
		ents, _ := os.ReadDir(from)
		for _, e := range ents {
			if e.Name() == "lib-dynload" {
				continue
			}
			if err := os.Symlink(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	link(stdlib, std)
	link(filepath.Join(stdlib, "lib-dynload"), dyn)
	src := filepath.Join(base, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "dep.c"), []byte("int crux_dep_answer(void) { return 42; }\n"), 0o644)
	os.WriteFile(filepath.Join(src, "ext.c"), []byte("int crux_dep_answer(void);\nint crux_ext_answer(void) { return crux_dep_answer(); }\n"), 0o644)
	ext := filepath.Join(dyn, "cruxext.so")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", filepath.Join(lib, "libcruxdep.so"), filepath.Join(src, "dep.c")},
		{"-shared", "-fPIC", "-o", ext, filepath.Join(src, "ext.c"), "-L" + lib, "-lcruxdep", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../.."},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Skipf("cannot build the extension module: %v %s", err, out)
		}
	}
	env := filepath.Join(base, "env")
	work := filepath.Join(base, "work")
	os.Mkdir(env, 0o755)
	os.Mkdir(work, 0o755)
	sb := invoke.BwrapFor(bwrap, py, version, "")
	// The host's stdlib the entries link to (a real conda prefix holds
	// them itself).
	sb.ReadOnly = append(sb.ReadOnly, stdlib)
	argv, err := sb.Argv(&invoke.Call{Env: env}, work)
	if err != nil {
		t.Fatal(err)
	}
	argv = append(argv, py, "-I", "-c", "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).crux_ext_answer())", ext)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("loading %s in the sandbox: %v\n%s", ext, err, out)
	}
}

// bwrapPython skips t where bwrap cannot run, and returns it with the
// test interpreter's real path, version, stdlib directory and X.Y.
func bwrapPython(t *testing.T) (bwrap, real, version, stdlib, xy string) {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	if out, err := exec.Command(bwrap, "--unshare-net", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot run here: %v %s", err, out)
	}
	real, _ = filepath.EvalSymlinks(python)
	out, err := exec.Command(python, "-I", "-c", "import platform, sysconfig; print(platform.python_version()); print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	version, stdlib = f[0], f[1]
	return bwrap, real, version, stdlib, version[:strings.LastIndexByte(version, '.')]
}

// bwrapBase is a new directory readable by all, removed when t ends.
func bwrapBase(t *testing.T, name string) string {
	t.Helper()
	base, err := os.MkdirTemp("", "cruxprov-invoke-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(base) })
	os.Chmod(base, 0o755)
	return base
}

// TestLeftChildDoesNotHoldTheRun: a tool that leaves a child holding its
// stdout and stderr (a background helper started with subprocess) and
// returns ok is recorded ok as soon as the harness exits, with or without
// the namespaces, and the child is gone. Without them, the run waited
// for the pipes the child held until the grace ran out: a run with less
// time left than the grace was recorded timeout (exit status 0) after its
// ok result, any other took the grace longer.
func TestLeftChildDoesNotHoldTheRun(t *testing.T) {
	f := fixture(t)
	for _, noNS := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoNamespaces=%v", noNS), func(t *testing.T) {
			l, path := openLedger(t)
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), NoNamespaces: noNS, Grace: 10 * time.Second}
			token := fmt.Sprintf("cruxprov-linger-%d-%v", os.Getpid(), noNS)
			c := f.Call("linger", map[string]string{"token": token}, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
			c.Limits = invoke.Budgets{TimeoutMS: 3000}
			start := time.Now()
			res, err := ex.Run(context.Background(), c)
			took := time.Since(start)
			t.Cleanup(func() {
				for _, p := range invoketest.ProcsWith(token) {
					syscall.Kill(p, syscall.SIGKILL)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != invoke.StatusOK || res.ExitCode != 0 || string(res.Value) != `{"lingering":true}` {
				t.Errorf("%s exit %d %s %+v, want ok {\"lingering\":true}", res.Status, res.ExitCode, res.Value, res.Error)
			}
			if took > 2500*time.Millisecond {
				t.Errorf("the run took %v: it waited for the child's pipes", took)
			}
			r, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
			if err != nil || len(r.Attempts) != 1 || r.Attempts[0].Outcome == nil || r.Attempts[0].Outcome.Status != receipts.StatusOK {
				t.Errorf("the ledger does not hold one ok outcome: %+v, %v", r, err)
			}
			if left := invoketest.ProcsWith(token); len(left) > 0 {
				t.Errorf("the tool's child outlived the run: %v", left)
			}
		})
	}
}

// TestHarnessSeesANormalStart: the harness is started as python -I -m
// harness (python.Harness) with fd 1 on stderr and the protocol channel
// on invoke.ProtocolFD (python.ProtocolFDVar), so that the env's .pth
// files run only once fd 1 is stderr. The provider must see what `python
// -I` leaves any program in the env: the same sys.prefix, sys.exec_prefix,
// sys.base_prefix and sys.path (the env's site-packages, not the base
// interpreter's), no user site, sitecustomize imported where the
// interpreter has one, usercustomize not; and what `python -I -m` gives
// the harness: sys.argv, sys.orig_argv, sys.executable, every sys.flags
// (no_site 0), and so multiprocessing children (spawn, forkserver) that
// start with site, the env's sys.prefix and .pth files. The channel's
// descriptor and variable reach no subprocess. On Debian's CPython and,
// where it is readable, pyenv's.
func TestHarnessSeesANormalStart(t *testing.T) {
	f := fixture(t)
	envs := map[string]invoketest.Fixtures{python: f}
	const pyenv = "/root/.pyenv/versions/3.11.7/bin/python3.11"
	if _, err := os.Stat(pyenv); err == nil {
		f2, err := invoketest.BuildLocal(context.Background(), filepath.Join(t.TempDir(), "fx"), pyenv)
		if err != nil {
			t.Fatal(err)
		}
		envs[pyenv] = f2
	}
	const script = `import json, site, sys
print(json.dumps({"prefix": sys.prefix, "exec_prefix": sys.exec_prefix, "base_prefix": sys.base_prefix,
    "path": sys.path, "isolated": sys.flags.isolated, "no_user_site": sys.flags.no_user_site,
    "ignore_environment": sys.flags.ignore_environment, "enable_user_site": site.ENABLE_USER_SITE,
    "sitecustomize": "sitecustomize" in sys.modules, "usercustomize": "usercustomize" in sys.modules}))`
	for interp, f := range envs {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(interp)))+"-"+filepath.Base(interp), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(f.Env, f.Python), "-I", "-c", script)
			cmd.Env = []string{}
			cmd.Dir = t.TempDir()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("python -I: %v", err)
			}
			var want map[string]any
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatal(err)
			}
			site := filepath.Join(f.Env, "lib", "python3.11", "site-packages")
			if p, _ := want["path"].([]any); len(p) == 0 || p[len(p)-1] != site {
				t.Fatalf("python -I's sys.path %v does not end with the env's site-packages %s", want["path"], site)
			}
			ex := &invoke.Subprocess{WorkdirParent: t.TempDir()}
			res, err := ex.Run(context.Background(), f.Call("startup", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != invoke.StatusOK {
				t.Fatalf("%s %+v", res.Status, res.Error)
			}
			var got map[string]any
			if err := json.Unmarshal(res.Value, &got); err != nil {
				t.Fatal(err)
			}
			if ran, _ := got["pth_ran"].([]any); len(ran) == 0 {
				t.Errorf("the env's .pth file did not run: %s", res.Value)
			}
			delete(got, "pth_ran")
			if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
				t.Errorf("the provider saw\n%s\nwhere python -I sees\n%s", g, w)
			}

			// The provider's own start, and its multiprocessing children's
			// (spawn, forkserver: they get the interpreter's flags), are
			// those python -I -m gives with the channel on fd 1, as an
			// env whose runtime predates the handoff is still run
			// (Runtime 0.1.0: python.Handoff), descriptors included.
			start := func(runtime string) (self map[string]any, kids map[string]map[string]any, fds map[string]any) {
				t.Helper()
				c := f.Call("startup", map[string]any{"start": true}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
				c.Runtime = runtime
				res, err := ex.Run(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != invoke.StatusOK {
					t.Fatalf("runtime %q: %s %+v", runtime, res.Status, res.Error)
				}
				var v struct {
					Start struct {
						Self        map[string]any            `json:"self"`
						Children    map[string]map[string]any `json:"children"`
						Descriptors map[string]any            `json:"descriptors"`
					} `json:"start"`
				}
				if err := json.Unmarshal(res.Value, &v); err != nil {
					t.Fatal(err)
				}
				for _, k := range v.Start.Children {
					// Up to -c: what follows names the descriptors of the
					// child's pipes.
					if a, ok := k["orig_argv"].([]any); ok {
						for i, x := range a {
							if x == "-c" {
								k["orig_argv"] = a[:i]
								break
							}
						}
					}
				}
				return v.Start.Self, v.Start.Children, v.Start.Descriptors
			}
			self, kids, fds := start(f.Runtime)
			wantSelf, wantKids, _ := start("0.1.0")
			if f.Runtime != pyrt.RuntimeVersion {
				t.Fatalf("the fixture's runtime is %q, not %s", f.Runtime, pyrt.RuntimeVersion)
			}
			if g, w := fmt.Sprint(self), fmt.Sprint(wantSelf); g != w {
				t.Errorf("the provider's start\n%s\nis not python -I -m's\n%s", g, w)
			}
			if a, _ := self["argv"].([]any); len(a) == 0 || !strings.HasSuffix(fmt.Sprint(a[0]), "/cruxible_provider_runtime/harness.py") {
				t.Errorf("the provider's sys.argv is %v", self["argv"])
			}
			for _, m := range []string{"spawn", "forkserver"} {
				k := kids[m]
				if flags, _ := k["flags"].(map[string]any); flags["no_site"] != 0.0 || flags["isolated"] != 1.0 {
					t.Errorf("a %s child's flags: %v", m, k["flags"])
				}
				if k["prefix"] != f.Env || k["pth_ran"] == 0.0 {
					t.Errorf("a %s child's sys.prefix %v (the env is %s), .pth files run %v times", m, k["prefix"], f.Env, k["pth_ran"])
				}
				if g, w := fmt.Sprint(k), fmt.Sprint(wantKids[m]); g != w {
					t.Errorf("a %s child's start\n%s\nis not that of a child under python -I -m\n%s", m, g, w)
				}
			}
			// The channel's descriptor and the variable that named it stay
			// the harness's: a subprocess, even with close_fds=False, gets
			// neither.
			if fds["var"] != nil || fds["child_var"] != nil || fmt.Sprint(fds["inheritable"]) != "[0 1 2]" {
				t.Errorf("the provider would pass on %v (the variable %v; its subprocess saw %v)", fds["inheritable"], fds["var"], fds["child_var"])
			}
			if c, _ := fds["child_fds"].([]any); len(c) > 4 {
				t.Errorf("a subprocess inherited descriptors: %v", c)
			}
		})
	}
}

// TestRuntimeReadFromTheEnv: a Call that does not name its runtime (a Go
// API caller that builds it by hand, as docs/executor.md's example did)
// gets the wiring of the runtime the env has installed, so that start-up
// code in the env cannot write the result: before, "" meant the old
// wiring, and the .pth file found the protocol channel on fd 1. The
// caller's Call is not written to.
func TestRuntimeReadFromTheEnv(t *testing.T) {
	f := fixture(t)
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir()}
	c := f.Call("startup", nil, map[string]string{"acme/alpha": "alpha-1", "acme/beta": "beta-1"})
	c.Runtime = ""
	c.Inject = append(c.Inject, "ACME_STARTUP=print,write")
	res, err := ex.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime != "" {
		t.Errorf("the caller's Call was written to: Runtime %q", c.Runtime)
	}
	if res.Status != invoke.StatusOK {
		t.Fatalf("%s exit %d %+v: the .pth's output reached the result channel", res.Status, res.ExitCode, res.Error)
	}
	var got struct {
		PthRan []string `json:"pth_ran"`
	}
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("result %s: %v", res.Value, err)
	}
	if len(got.PthRan) == 0 || slices.ContainsFunc(got.PthRan, func(s string) bool { return s != "stderr" }) {
		t.Errorf("when acme_startup.pth ran, fd 1 was %q, want stderr", got.PthRan)
	}
}

// TestInstalledRuntime: the runtime's version from its dist-info's name;
// none, two, or a name that is not name-version, say nothing.
func TestInstalledRuntime(t *testing.T) {
	for _, tc := range []struct {
		name string
		dirs []string
		want string
	}{
		{"one", []string{"cruxible_provider_runtime-0.2.0.dist-info", "acme_echo-1.0.dist-info"}, "0.2.0"},
		{"older", []string{"cruxible_provider_runtime-0.1.0.dist-info"}, "0.1.0"},
		{"none", []string{"acme_echo-1.0.dist-info"}, ""},
		{"two", []string{"cruxible_provider_runtime-0.1.0.dist-info", "cruxible_provider_runtime-0.2.0.dist-info"}, ""},
		{"not name-version", []string{"cruxible_provider_runtime-extra-0.2.0.dist-info"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(site, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if got := invoke.InstalledRuntime(site); got != tc.want {
				t.Errorf("%v: %q, want %q", tc.dirs, got, tc.want)
			}
		})
	}
}

package invoke_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/seal"
)

// envWrites is the hostile probe's report of its writes into its env.
type envWrites struct {
	IsolatedImport int    `json:"isolated_import"`
	IsolatedStderr string `json:"isolated_stderr"`
	Pycache        bool   `json:"pycache"`
	Append         string `json:"append"`
}

// TestRootRunSeesItsEnvReadOnly: a run started by root sees its env
// through a read-only bind in a mount namespace of its own, with its user
// and pid namespaces and without them. The env's 0555/0444 modes stop
// every other user, not root: before, a root provider's Python subprocess
// started isolated (sys.executable -I, which ignores
// PYTHONDONTWRITEBYTECODE) wrote __pycache__ into an env made without
// bytecode, and a module opened to append was written; the next call's
// verify refused the env env_drift (that call here). Now the writes fail
// read-only, both calls run, the env verifies deeply after, and the
// host's mount table never shows the bind (read during the run, from
// the secret resolver, and after): checked here as the host's mounts are,
// and again in a child of this test whose mount namespace's mounts are
// shared (unshare --propagation shared; systemd makes the host's so,
// this machine's may be private), where a bind made without first
// making the run's mounts private shows in the child's table. With its
// namespaces the provider cannot remount the bind read-write.
func TestRootRunSeesItsEnvReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the read-only view is made for runs started by root: another user's run is kept out of its env by the env's modes (TestNoBytecodeEnvStaysSealed)")
	}
	fixture(t) // skips where the fixture env cannot be built
	if invoke.MountNamespaceRefused() {
		t.Skip("the kernel refuses this root a mount namespace (no CAP_SYS_ADMIN): its runs go without the read-only view, as TestRootRunWithoutMountNamespaceRecorded checks")
	}
	if os.Getenv("CRUXPROV_INVOKE_SHARED") == "" {
		if unshare, err := exec.LookPath("unshare"); err != nil {
			t.Logf("no unshare here: not checked where the host's mounts are shared")
		} else {
			cmd := exec.Command(unshare, "--mount", "--propagation", "shared", os.Args[0], "-test.run=^TestRootRunSeesItsEnvReadOnly$", "-test.count=1")
			cmd.Env = append(os.Environ(), "CRUXPROV_INVOKE_SHARED=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("where the host's mounts are shared: %v\n%s", err, out)
			}
		}
	}
	ctx := context.Background()
	for _, ex := range []*invoke.Subprocess{{}, {NoNamespaces: true}} {
		name := "namespaces"
		if ex.NoNamespaces {
			name = "no-namespaces"
		}
		t.Run(name, func(t *testing.T) {
			f, err := invoketest.BuildLocalWith(ctx, invoketest.TempDir(t), python, invoketest.LocalOptions{NoCompile: true})
			if err != nil {
				t.Fatal(err)
			}
			env, err := filepath.Abs(f.Env)
			if err != nil {
				t.Fatal(err)
			}
			if m := mountsAt(t, env); len(m) > 0 {
				t.Fatalf("before any run, the host has mounts at or below the env: %q", m)
			}
			l, path := openLedger(t)
			ex.Ledger, ex.WorkdirParent = l, t.TempDir()
			for i := range 2 { // the second call's verify refused the first's writes
				c := f.Call("probe", map[string]any{"env_writes": true, "escape": !ex.NoNamespaces}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
				resolve := c.Resolve
				var during []string
				c.Resolve = func(ctx context.Context, ref string) (string, error) {
					// After the intent, the view made: the run's start.
					during = append(during, mountsAt(t, env)...)
					return resolve(ctx, ref)
				}
				res, err := ex.Run(ctx, c)
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if res.Status != invoke.StatusOK {
					t.Fatalf("call %d: %s %+v", i+1, res.Status, res.Error)
				}
				var v struct {
					EnvWrites envWrites `json:"env_writes"`
					Escape    *struct {
						RemountEnv  string `json:"remount_env"`
						ProcRootEnv []int  `json:"proc_root_env"`
					} `json:"escape"`
				}
				if err := json.Unmarshal(res.Value, &v); err != nil {
					t.Fatal(err)
				}
				w := v.EnvWrites
				if w.IsolatedImport != 0 {
					t.Errorf("call %d: the isolated import exited %d: %s", i+1, w.IsolatedImport, w.IsolatedStderr)
				}
				if w.Pycache || w.Append != "Read-only file system" {
					t.Errorf("call %d: __pycache__ written %v, append %q; want none, and Read-only file system", i+1, w.Pycache, w.Append)
				}
				if v.Escape != nil && (v.Escape.RemountEnv == "ok" || len(v.Escape.ProcRootEnv) > 0) {
					t.Errorf("call %d: the provider remounted its env read-write (%s), or could write it through /proc/PID/root of %v", i+1, v.Escape.RemountEnv, v.Escape.ProcRootEnv)
				}
				if len(during) > 0 {
					t.Errorf("call %d: during the run the host had mounts at or below the env: %q", i+1, during)
				}
			}
			var want []string
			if ex.NoNamespaces {
				want = []string{invoke.LimitNamespaces}
			}
			if got := unenforced(t, path); !slices.Equal(got, want) {
				t.Errorf("unenforced %q, want %q", got, want)
			}
			filepath.WalkDir(env, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "__pycache__" {
					t.Errorf("the run wrote %s into the sealed env", p)
				}
				return nil
			})
			if _, err := seal.Verify(ctx, env, seal.Options{Deep: true}); err != nil {
				t.Errorf("the env after the runs: %v", err)
			}
			if m := mountsAt(t, env); len(m) > 0 {
				t.Errorf("after the runs, the host has mounts at or below the env: %q", m)
			}
		})
	}
}

// mountsAt returns the mount points at or below dir in the host's mount
// table (this thread's: every thread but a run's sees the host's).
func mountsAt(t *testing.T, dir string) []string {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		// Field 5 is the mount point, octal-escaped; an env path has no
		// character that is escaped.
		if mp := f[4]; mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// TestRootRunWithoutMountNamespaceRecorded: an executor run by root
// without CAP_SYS_ADMIN (a container's root, as Docker starts it) cannot
// make its runs a mount namespace: the run goes as before the read-only
// view, and its receipt names it among the limits it went without
// ("unenforced": ["readonly_env"]). The child is this test binary started
// by root with CAP_SYS_ADMIN out of its bounding set (setpriv).
func TestRootRunWithoutMountNamespaceRecorded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the read-only view is made for runs started by root only")
	}
	f := fixture(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("no setpriv here to start a root without CAP_SYS_ADMIN: %v", err)
	}
	fxj, _ := json.Marshal(f)
	work := t.TempDir()
	cmd := exec.Command(setpriv, "--bounding-set", "-sys_admin", os.Args[0], "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_INVOKE_CHILD=nosysadmin", "CRUXPROV_INVOKE_FIXTURES=" + string(fxj), "CRUXPROV_INVOKE_WORK=" + work, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rep noSysAdminReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	if !rep.Refused {
		t.Skip("the kernel gave the root without CAP_SYS_ADMIN a mount namespace")
	}
	if rep.Status != "ok" || !slices.Contains(rep.Unenforced, invoke.LimitReadOnlyEnv) {
		t.Errorf("without CAP_SYS_ADMIN: status %q, unenforced %q; want ok, naming %q", rep.Status, rep.Unenforced, invoke.LimitReadOnlyEnv)
	}
}

type noSysAdminReport struct {
	Refused    bool     `json:"refused"` // the kernel refused this process a mount namespace
	Status     string   `json:"status"`
	Unenforced []string `json:"unenforced"`
	Err        string   `json:"err,omitempty"`
}

// noSysAdminMain is TestRootRunWithoutMountNamespaceRecorded's child: root
// without CAP_SYS_ADMIN, it runs probe (no write: the env is the shared
// fixture's) with a ledger and reports what the intent says.
func noSysAdminMain() int {
	var rep noSysAdminReport
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	rep.Refused = invoke.MountNamespaceRefused()
	ctx := context.Background()
	f, work, l, err := childLedger("receipts.jsonl")
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer l.Close()
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: work}
	res, err := ex.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	rep.Status = string(res.Status)
	sr, err := receipts.Scan(ctx, []string{l.Path()}, receipts.ScanOptions{})
	if err != nil || len(sr.Attempts) != 1 {
		rep.Err = fmt.Sprintf("the ledger: %v", err)
		return 0
	}
	rep.Unenforced = sr.Attempts[0].Intent.Unenforced
	return 0
}

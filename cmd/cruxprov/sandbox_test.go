package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestRunSandboxBwrap: `run --sandbox bwrap` of an approved pin runs the
// provider under bubblewrap with the env, its sealed interpreter's files
// (real path, stdlib, libpython, loader and system libraries) and the
// workdir visible, and the provider answers. It runs with the system
// interpreter and, when python3.11 on PATH is another one (a pyenv or
// uv build under its own prefix, perhaps with a shared libpython), with
// that one too.
func TestRunSandboxBwrap(t *testing.T) {
	var pythons []string
	if _, err := os.Stat(debian); err == nil {
		pythons = append(pythons, debian)
	}
	if out, err := exec.Command("python3.11", "-I", "-c", "import os, sys; print(os.path.realpath(sys.executable))").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != debian {
			pythons = append(pythons, p)
		}
	}
	if len(pythons) == 0 {
		t.Skipf("needs %s or python3.11 on PATH", debian)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	if out, err := exec.Command(bwrap, "--unshare-net", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot run here (it needs user namespaces, or to be setuid): %v %s", err, out)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	for _, python := range pythons {
		t.Run(python, func(t *testing.T) { runSandboxBwrap(t, fx, python) })
	}
}

func runSandboxBwrap(t *testing.T, fx *fixtures.Set, python string) {
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	_, must, approveInstall := approvingStore(t, w, base, python)
	approveInstall()
	secret := filepath.Join(base, "token")
	os.WriteFile(secret, []byte("s3cr3t"), 0o644)
	input := filepath.Join(base, "input.json")
	os.WriteFile(input, []byte(`{"hello": "world"}`), 0o644)
	r := must("run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@"+secret, "--sandbox", "bwrap")
	t.Logf("interpreter %s, sandboxed run: %s", python, strings.TrimSpace(r.stdout))
	if !strings.Contains(r.stdout, `"hello":"world"`) {
		t.Errorf("run --sandbox bwrap answered %+v", r)
	}
	noCoreBehindBwrap(t, w, base, secret)
}

// noCoreBehindBwrap: no process of a `run --sandbox bwrap` may dump core
// (the harness holds the secret bundle), though the executor was started
// with an unlimited core limit: bwrap has no init shell to set it, and
// the executor's own was inherited.
func noCoreBehindBwrap(t *testing.T, w *governedWorld, base, secret string) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &old); err != nil || old.Max == 0 {
		t.Logf("core limit %+v (%v): nothing to lower", old, err)
		return
	}
	raised := syscall.Rlimit{Cur: old.Max, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &raised); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_CORE, &old)
	input := filepath.Join(base, "sleep.json")
	os.WriteFile(input, []byte(`{"seconds": 3}`), 0o644)
	cmd := exec.Command(bin, "--home", filepath.Join(base, "home"), "run", "acme-echo", "sleep", "--input", input,
		"--secret", "acme/api-token=@"+secret, "--sandbox", "bwrap")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The run's processes: the executor's descendants, once the
	// provider (a python under bwrap) sleeps.
	var seen map[int]string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		seen = descendantsCoreLimits(cmd.Process.Pid)
		python := false
		for pid := range seen {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if argv0, _, _ := strings.Cut(string(b), "\x00"); strings.Contains(filepath.Base(argv0), "python") {
				python = true
			}
		}
		if python {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("run of sleep: %v: %s", err, out.String())
	}
	if len(seen) < 2 {
		t.Fatalf("the run's processes were not seen: %v; the run said %s", seen, out.String())
	}
	for pid, lim := range seen {
		if f := strings.Fields(lim); len(f) < 6 || f[4] != "0" || f[5] != "0" {
			t.Errorf("process %d of the run may dump core: %q", pid, lim)
		}
	}
}

// descendantsCoreLimits is the "Max core file size" line of pid and of
// every process below it.
func descendantsCoreLimits(pid int) map[int]string {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		var state string
		var pp, me int
		fmt.Sscan(filepath.Base(filepath.Dir(p)), &me)
		if _, err := fmt.Sscan(rest, &state, &pp); err == nil {
			parent[me] = pp
		}
	}
	out := map[int]string{}
	for me := range parent {
		for p := me; p > 1; p = parent[p] {
			if p == pid {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", me))
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "Max core file size") {
						out[me] = l
					}
				}
				break
			}
		}
	}
	return out
}

// TestRunWorkdirInTMPDIR: run makes each run's working directory in
// $TMPDIR, as a program's temp files go, so an executor whose /tmp is
// read-only or small can point it elsewhere; it ignored TMPDIR (always
// /tmp), and its refusal named WorkdirParent, a field of the Go API.
func TestRunWorkdirInTMPDIR(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	input := filepath.Join(base, "input.json")
	os.WriteFile(input, []byte(`{"hello": "world"}`), 0o644)
	secret := filepath.Join(base, "token")
	os.WriteFile(secret, []byte("s3cr3t"), 0o644)
	args := []string{"run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@" + secret}

	missing := filepath.Join(base, "no-such-tmp")
	t.Setenv("TMPDIR", missing)
	r := run(args...)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: invoke_failed: cannot make the run's working directory in "+missing) ||
		!strings.Contains(r.stderr, "TMPDIR") {
		t.Errorf("TMPDIR missing: %+v, want invoke_failed naming it", r)
	}
	tmp := filepath.Join(base, "tmp")
	os.Mkdir(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	if r := must(args...); !strings.Contains(r.stdout, `"hello":"world"`) {
		t.Errorf("run with TMPDIR=%s: %+v", tmp, r)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

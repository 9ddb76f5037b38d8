package main

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestEnvReplaceKilledAtEachRename kills `env create --replace ENV` with
// SIGKILL at its first rename, then its second, and so on until one runs
// through (strace's syscall fault injection). After each kill the same
// command must rebuild the env and the env must verify deep. The replace
// used to remove the old seal before it moved the old tree aside, so a
// kill between that and the new seal left an env with no seal: the
// command named in the docs was refused seal_missing, and the operator had
// to name the wheel, platform and interpreter again. strace counts
// invocations per thread, so the n-th kill is at the n-th rename of some
// thread of the process.
func TestEnvReplaceKilledAtEachRename(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (.ci/apt-packages lists it): no way to kill the process at each rename")
	}
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	home := testdir.New(t)
	out := createJSON(t, "--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", idx, "--json")
	replace := []string{"--home", home, "env", "create", "--replace", out.Path, "--offline"}
	for n := 1; n <= 40; n++ {
		cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null",
			"-e", "trace=rename,renameat,renameat2",
			"-e", "inject=rename,renameat,renameat2:signal=SIGKILL:when=" + strconv.Itoa(n), bin}, replace...)...)
		b, err := cmd.CombinedOutput()
		if err == nil {
			if n == 1 {
				t.Fatalf("the replace ran through under strace with no rename killed: %s", b)
			}
			t.Logf("killed at each of %d renames", n-1)
			return
		}
		if r := cruxprov(t, replace...); r.code != 0 {
			t.Fatalf("killed at rename %d (%v): the same replace again: %+v", n, err, r)
		}
		if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
			t.Fatalf("killed at rename %d, replaced again: verify --deep: %+v", n, r)
		}
	}
	t.Fatal("the replace did not run through after 40 kills")
}

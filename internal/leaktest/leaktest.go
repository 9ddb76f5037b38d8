// Package leaktest makes, for tests, a program that exits but leaves a
// process holding its output: a wrapper script named as the real program
// that starts a sleeper inheriting its stdout and stderr, then execs the
// real one. A caller that reads the program's output to its end (exec.Cmd's
// Output, pipes) waits for the sleeper unless it bounds that wait
// (exec.Cmd.WaitDelay). Tests of the interpreter probes and the podman
// executor use it.
package leaktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Sleep is how long the sleeper each run of the wrapper leaves holds
// the output: longer than any bound a test waits for.
const Sleep = "60"

// Wrapper writes, in a temporary directory, a script named name that
// leaves a sleeper holding its stdout and stderr, then execs real (found
// on PATH when it has no slash; t is skipped when it is not there). Every
// sleeper it left is killed when t ends. It returns the script's path.
func Wrapper(t testing.TB, name, real string) string {
	t.Helper()
	path, err := exec.LookPath(real)
	if err != nil {
		t.Skipf("needs %s", real)
	}
	dir := t.TempDir()
	pids := filepath.Join(dir, "sleepers")
	w := filepath.Join(dir, name)
	// The wrapped program may run with no PATH: every program by its path.
	script := "#!/bin/sh\n(/bin/sleep " + Sleep + " & echo $! >>" + pids + ") ; exec " + path + " \"$@\"\n"
	if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return w
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/registry"
)

// TestSignalDuringKeyScrypt: a SIGINT or SIGTERM that comes while a
// private key's scrypt runs (about a second of CPU: changeset approve
// opening its key, key generate encrypting a new one) stops the command
// at once. The scrypt did not look at the command's context: changeset
// approve ended 0.6–1.4 s after the signal (scripts/interrupt-stress.py,
// as cruxprov-rootless on a loaded host), and key generate went on to
// write the pair and exit 0. The signal is sent once the process has
// spent 100 ms of CPU (its start-up spends a few ms: it is in the
// scrypt), and it must be gone in a quarter of the time the same
// command takes uninterrupted; it says it was interrupted, nothing is
// approved or written, and the same command run again completes.
func TestSignalDuringKeyScrypt(t *testing.T) {
	// Either signal cancels the command's context alike (main's
	// watchInterrupts): one each.
	for _, sig := range []syscall.Signal{syscall.SIGINT} {
		t.Run("changeset approve/"+sig.String(), func(t *testing.T) {
			home, id, key, env := proposedHome(t)
			approve := func() *exec.Cmd {
				cmd := exec.Command(bin, "--home", home, "changeset", "approve", id, "--key", key)
				cmd.Env = env
				return cmd
			}
			// How long an approve takes, on a change-set of its own.
			h2, id2, key2, env2 := proposedHome(t)
			cmd := exec.Command(bin, "--home", h2, "changeset", "approve", id2, "--key", key2)
			cmd.Env = env2
			whole := timed(t, cmd)
			r, took := interruptInScrypt(t, approve(), sig)
			checkInterrupted(t, r, took, whole)
			if s := changeSetState(t, home, id, env); s != registry.StateProposed {
				t.Fatalf("interrupted, the change-set is %s", s)
			}
			if r := runCmd(t, approve()); r.code != 0 || !strings.Contains(r.stdout, "accepted") {
				t.Fatalf("the same approve again: %+v", r)
			}
		})
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM} {
		t.Run("key generate/"+sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			gen := func(prefix string) *exec.Cmd {
				cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "key", "generate", "--out", prefix)
				cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
				return cmd
			}
			whole := timed(t, gen(filepath.Join(dir, "other", "k")))
			prefix := filepath.Join(dir, "keys", "alice")
			r, took := interruptInScrypt(t, gen(prefix), sig)
			checkInterrupted(t, r, took, whole)
			if ents, err := os.ReadDir(filepath.Dir(prefix)); err == nil && len(ents) > 0 {
				t.Fatalf("interrupted, it left %v", ents)
			}
			if r := runCmd(t, gen(prefix)); r.code != 0 || strings.Contains(r.stdout, "completed") {
				t.Fatalf("the same key generate again: %+v", r)
			}
		})
	}
}

// timed runs cmd, which must succeed, and returns how long it took.
func timed(t *testing.T, cmd *exec.Cmd) time.Duration {
	t.Helper()
	start := time.Now()
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("%v: %+v", cmd.Args, r)
	}
	return time.Since(start)
}

// interruptInScrypt starts cmd, sends it sig once it has spent 100 ms of
// CPU, and returns what it said and how long it took to exit after the
// signal.
func interruptInScrypt(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) (result, time.Duration) {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for cpuTicks(cmd.Process.Pid) < 10 { // 100 ms at USER_HZ 100
		select {
		case <-exited:
			t.Fatalf("%v ended before it spent 100 ms of CPU: %s", cmd.Args, se.String())
		case <-time.After(2 * time.Millisecond):
		}
	}
	sent := time.Now()
	cmd.Process.Signal(sig)
	<-exited
	return result{so.String(), se.String(), cmd.ProcessState.ExitCode()}, time.Since(sent)
}

// cpuTicks is the CPU time (user and system, in clock ticks) process pid
// has spent; 0 when it cannot be read.
func cpuTicks(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// checkInterrupted: r is an interrupted command's (exit 1, one line
// saying so), gone within a quarter of whole after the signal.
func checkInterrupted(t *testing.T, r result, took, whole time.Duration) {
	t.Helper()
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: interrupted by a signal") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("signalled in its scrypt: %+v", r)
	}
	t.Logf("stopped %s after the signal; uninterrupted, %s", took, whole)
	if took > whole/4 {
		t.Fatalf("it took %s to stop after the signal; uninterrupted, the command takes %s", took, whole)
	}
}

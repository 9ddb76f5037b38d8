package podman

import (
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
)

// fakeProcess starts argv as a run's podman client is started (its own
// process group, the run's pipes), with an Executor whose podman is
// true(1): kill, rm and inspect succeed and say nothing.
func fakeProcess(t *testing.T, argv ...string) *process {
	t.Helper()
	pipes, err := newStdio(nil, io.Discard, &tailWriter{w: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes.child[0], pipes.child[1], pipes.child[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pipes.started()
	if err != nil {
		pipes.close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return &process{e: &Executor{Podman: "true"}, cmd: cmd, name: "cruxprov-test-none", stdio: pipes, cleanup: func() {}, cwd: t.TempDir(), exited: invoke.WatchExit(cmd.Process.Pid)}
}

// groupKills records the process groups Signal kills (and kills them),
// and fails t for a group whose leader had been reaped by then: its pid,
// and so a group of that id, may be another process's.
func groupKills(t *testing.T) func() []int {
	var mu sync.Mutex
	var pgids []int
	setKillGroup(t, func(pgid int) {
		// Signal 0 reaches a zombie: ESRCH is a leader already reaped
		// (or a pid taken by another process since, which this cannot
		// tell: the kill is what must not happen).
		if err := syscall.Kill(pgid, 0); err != nil {
			t.Errorf("process group %d was signalled after its leader was reaped (kill %d, 0: %v)", pgid, pgid, err)
		}
		mu.Lock()
		pgids = append(pgids, pgid)
		mu.Unlock()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), pgids...)
	}
}

// TestSignalAfterReapSendsNothing: once Wait has reaped the podman
// client, Signal(false) (a kill that comes as the run ends: the timeout,
// the flood) sends its process group nothing: the pid, and a group of
// that id, are free for another process to take by then. Before, it
// killed the group whatever.
func TestSignalAfterReapSendsNothing(t *testing.T) {
	kills := groupKills(t)
	p := fakeProcess(t, "true")
	if code, _, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("Wait: %d %v", code, err)
	}
	p.Signal(false)
	if k := kills(); len(k) != 0 {
		t.Errorf("Signal after the client was reaped killed process group(s) %v", k)
	}
}

// TestSignalBeforeReapKillsTheClient: a client still running is killed,
// with its group, and Wait then returns.
func TestSignalBeforeReapKillsTheClient(t *testing.T) {
	kills := groupKills(t)
	p := fakeProcess(t, "sleep", "60")
	done := make(chan struct{})
	go func() { _, _, _ = p.Wait(); close(done) }()
	p.Signal(false)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after Signal(false)")
	}
	if k := kills(); len(k) != 1 || k[0] != p.cmd.Process.Pid {
		t.Errorf("Signal(false) killed the groups %v, want the client's, %d", k, p.cmd.Process.Pid)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the client ended %v, want killed by SIGKILL", p.cmd.ProcessState)
	}
}

// TestSignalRacesReap: Signal(false) beside Wait, as Dispatch calls them
// when a run ends as its timeout comes: never a group whose leader was
// reaped (groupKills fails the test for one).
func TestSignalRacesReap(t *testing.T) {
	groupKills(t)
	for range 50 {
		p := fakeProcess(t, "true")
		done := make(chan struct{})
		go func() { _, _, _ = p.Wait(); close(done) }()
		p.Signal(false)
		<-done
	}
}

package invoke_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
)

// TestWatchExit: WatchExit's function returns once the child has
// exited, and leaves it a zombie, not reaped: its pid is still its own
// until cmd.Wait, which then has its exit status. It opens nothing that
// outlives it (the pidfd is closed once the exit is seen). Package
// podman's client reap is built on it (TestSignalRacesReap there).
func TestWatchExit(t *testing.T) {
	before := pidfds(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := invoke.WatchExit(cmd.Process.Pid)
	if exited == nil {
		t.Fatal("WatchExit: nil on Linux")
	}
	seen := make(chan bool, 1)
	go func() { seen <- exited() }()
	select {
	case <-seen:
		t.Fatal("the watch returned while the child ran")
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-seen:
		if !ok {
			t.Fatal("the watch did not see the exit")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not return after the child's exit")
	}
	if s := procState(cmd.Process.Pid); s != "Z" {
		t.Errorf("after the watch the child is in state %q, want a zombie (Z), not reaped", s)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Errorf("cmd.Wait after the watch: %v, want the child's SIGTERM", err)
	}
	if n := pidfds(t); n != before {
		t.Errorf("pidfds open: %d before, %d after the watch", before, n)
	}
}

// procState is the state field of /proc/PID/stat ("" when it is gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}

// pidfds counts this process's open pidfds (os.Process holds one of
// its own for each child it started, until the child is reaped).
func pidfds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

package podman

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestClientKilledFromOutside: the podman client of a run killed by
// someone else (kill -9 of `podman run`, an OOM killer on the host) while
// its container runs is a failed run, recorded as such, and its container
// is killed and removed. Before, the executor inspected the container,
// still running, read its exit code as 0 and recorded the run exit 0,
// a protocol_error blaming the harness ("wrote no result"), and left the
// container running until podman's backstop. Rootless, the podman that
// attaches is a child of the one started, which exits 137 when it is
// killed: the executor read the container's state, running, as exit 0.
func TestClientKilledFromOutside(t *testing.T) {
	clientKilled(t, &Executor{}, fixture(t))
}

// clientKilled kills the podman process of a run that attaches to its
// container: the one started as root, its child rootless (podman re-runs
// itself in the user namespace; the one started then exits 137 as its
// child was killed, not by a signal).
func clientKilled(t *testing.T, base *Executor, f *invoketest.Container) {
	t.Helper()
	ctx := context.Background()
	l, path := tempLedger(t)
	e := *base
	e.Ledger = l
	// A line on stderr, then an exec whose arguments say it was written
	// (the marker is put together, so that podman's own arguments do
	// not carry it): what was read before the kill is kept.
	const line = "written before the kill\n"
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import os, sys; sys.stderr.write(" + strconv.Quote(line) + "); sys.stderr.flush(); " +
		"os.execv(sys.executable, [sys.executable, '-I', '-c', 'import time; time.sleep(60)', 'cruxprov-' + 'written'])"}
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a-value", "acme/beta": "b-value"})
	c.Budgets = invoke.Budgets{TimeoutMS: 50000}

	type ran struct {
		res *invoke.Result
		err error
	}
	done := make(chan ran, 1)
	go func() { res, err := e.Run(ctx, c); done <- ran{res, err} }()
	name := runningContainer(ctx, &e, ownerID())
	if name == "" {
		t.Fatal("the container never ran")
	}
	t.Cleanup(func() { e.podmanOut(context.Background(), "rm", "--force", "--time", "0", "--ignore", name) })
	if !processWith(t, "\x00cruxprov-written\x00") {
		t.Fatal("the container never wrote its line")
	}
	pid := podmanClient(t, os.Getpid(), name)
	if inner := podmanClient(t, pid, ""); inner != 0 {
		pid = inner
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r ran
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the run did not end after its podman client was killed")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	res := r.res
	if res.Status != invoke.StatusError || res.Error == nil || res.Error.Code != invoke.CodeExited ||
		!strings.HasPrefix(res.Error.Message, "podman, the container's client, ") || !strings.Contains(res.Error.Message, "137") || res.ExitCode != 137 {
		t.Fatalf("the run whose podman client was killed: %s, exit %d, %+v; want an error saying podman was killed", res.Status, res.ExitCode, res.Error)
	}
	d := time.Since(start)
	t.Logf("ended %v after the kill: %s", d.Round(time.Millisecond), res.Error.Message)
	// The client's exit is seen at once; what follows, podman inspect
	// and rm --force, took 0.8-1.7 s here (root and rootless, load ~6).
	// Before, the run noticed nothing until the container's pipes closed
	// or cmd.Wait's WaitDelay (5 s) was up: it ended 5.4-6.5 s after the
	// kill, the container running on, and read, all that time.
	if d > clientKilledLimit {
		t.Errorf("the run took %v after the kill, more than %v: the client's exit was not seen while its container held the pipes", d, clientKilledLimit)
	}
	if res.StderrBytes < int64(len(line)) {
		t.Errorf("%d bytes of stderr: the line the container wrote before the kill (%d bytes) was lost", res.StderrBytes, len(line))
	}
	if _, err := e.podmanOut(ctx, "container", "exists", name); err == nil {
		t.Errorf("the container %s is still there", name)
	}
	sc, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Attempts) != 1 || sc.Attempts[0].Outcome == nil || sc.Attempts[0].Outcome.Status != receipts.StatusError || sc.Attempts[0].Outcome.ExitCode != res.ExitCode {
		t.Fatalf("ledger: %+v; want the run's error outcome", sc.Attempts)
	}
}

// clientKilledLimit bounds how long a run whose podman client was killed
// takes to end after the kill: below the 5 s the executor waited before
// (WaitDelay), with room for a loaded machine.
const clientKilledLimit = 3 * time.Second

// runningContainer waits up to two minutes for a running container of
// the executor owner id and returns its name ("" if none ran).
func runningContainer(ctx context.Context, e *Executor, id string) string {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ := e.podmanOut(ctx, "ps", "--filter", "label="+LabelExecutor+"="+id, "--filter", "status=running", "--format", "{{.Names}}")
		if name := strings.TrimSpace(string(out)); name != "" {
			return name
		}
	}
	return ""
}

// processWith waits up to two minutes for a process whose command line
// holds marker (its arguments, each NUL-terminated), and reports whether
// one ran.
func processWith(t *testing.T, marker string) bool {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			if argv, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && strings.Contains(string(argv), marker) {
				return true
			}
		}
	}
	return false
}

// podmanClient is the pid of parent's `podman run` child for the
// container name (any podman child where name is ""; 0 if none).
func podmanClient(t *testing.T, parent int, name string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(parent)
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[i+1:])); len(f) < 2 || f[1] != self {
			continue
		}
		argv, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if strings.Contains(string(argv), "\x00run\x00") && (name == "" || strings.Contains(string(argv), "\x00"+name+"\x00")) {
			return pid
		}
	}
	if name != "" {
		t.Fatalf("no podman run child for %s", name)
	}
	return 0
}

// TestCutRunning: the running field is the last of podman inspect's
// answer, "true" or "false"; anything else is not an answer.
func TestCutRunning(t *testing.T) {
	for _, c := range []struct {
		in      string
		rest    string
		run, ok bool
	}{
		{"0 false true\n", "0 false", true, true},
		{"137 false false", "137 false", false, true},
		{"0 false", "0", false, true},
		{"0 false yes", "", false, false},
		{"true", "", false, false},
		{"", "", false, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			rest, run, ok := cutRunning([]byte(c.in))
			if string(rest) != c.rest || run != c.run || ok != c.ok {
				t.Errorf("cutRunning(%q) = %q %v %v, want %q %v %v", c.in, rest, run, ok, c.rest, c.run, c.ok)
			}
		})
	}
}

// TestRunDirHeld: a container run holds its private directory (the
// podman client's working directory, where conmon writes "oom") locked
// while it runs, as the subprocess executor holds its working
// directories, which share its name: that executor's sweep removes those
// a minute old that no run holds, so a container run's went, with its
// "oom", while the run went on. It is gone after the run.
func TestRunDirHeld(t *testing.T) {
	f := fixture(t)
	ctx := context.Background()
	e := &Executor{}
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(4)"}
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		done <- err
	}()
	name := runningContainer(ctx, e, ownerID())
	if name == "" {
		t.Fatal("the container never ran")
	}
	dir, err := os.Readlink("/proc/" + strconv.Itoa(podmanClient(t, os.Getpid(), name)) + "/cwd")
	if err != nil || !strings.HasPrefix(filepath.Base(dir), runDirPrefix) {
		t.Fatalf("the podman client's working directory %q: %v", dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	d.Close()
	if err == nil {
		t.Errorf("the running container's directory %s is not held", dir)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the run: %v", dir, err)
	}
}

// TestClientKilledBeforeStart: a podman client killed from outside
// before its container started is container_unavailable saying so; the
// refusal read "the container did not start: " and nothing more (podman
// said nothing on stderr).
func TestClientKilledBeforeStart(t *testing.T) {
	f := fixture(t)
	e := &Executor{}
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(30)"}
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		done <- err
	}()
	killed := false
	for deadline := time.Now().Add(2 * time.Minute); !killed; time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the run ended before its podman client was seen: %v", err)
		default:
		}
		if pid := podmanClient(t, os.Getpid(), ""); pid != 0 {
			killed = syscall.Kill(pid, syscall.SIGKILL) == nil
		}
		if time.Now().After(deadline) {
			t.Fatal("no podman client")
		}
	}
	err := <-done
	if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "podman, the container's client, was killed by SIGKILL from outside the executor; run again") {
		t.Errorf("%v; want container_unavailable saying podman was killed", err)
	}
}

// TestOutputReadToTheEnd: a run whose podman client exits after its
// container ended, exit 0 (no inspect) or not, has its stdout and stderr
// read to their last byte, though the executor now sees the client's
// exit apart from the pipes' end (TestClientKilledFromOutside); the wait
// for that end itself is TestStdioDrainsToTheEnd's.
func TestOutputReadToTheEnd(t *testing.T) {
	f := fixture(t)
	ctx := context.Background()
	const outN, errN = 300_000, 200_000
	for _, code := range []int{0, 3} {
		e := &Executor{UnenforcedLimits: !limitsApply(t)}
		e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", fmt.Sprintf(
			"import os\n"+
				"def w(fd, n):\n"+
				"    b = b'x' * n\n"+
				"    while b: b = b[os.write(fd, b):]\n"+
				"w(1, %d); w(2, %d); os._exit(%d)", outN, errN, code)}
		res, err := e.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != code || res.StdoutBytes != outN || res.StderrBytes != errN {
			t.Errorf("a run that exits %d: exit %d, %d bytes of stdout and %d of stderr read, want %d and %d", code, res.ExitCode, res.StdoutBytes, res.StderrBytes, outN, errN)
		}
	}
}

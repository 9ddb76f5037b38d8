package podman

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// killedChildEnv names the ledger a re-run of the test binary runs one
// long container call into, as an executor that is then SIGKILLed;
// killedFixtureEnv the parent's fixture (writeFixture).
const (
	killedChildEnv   = "CRUXPROV_TEST_KILLED_EXECUTOR_LEDGER"
	killedFixtureEnv = "CRUXPROV_TEST_KILLED_EXECUTOR_FIXTURE"
)

// TestExecutorKilledMidRunChild is the executor TestExecutorKilledMidRun
// kills: one run whose provider sleeps, its budget 30 s (the manifest's).
func TestExecutorKilledMidRunChild(t *testing.T) {
	path := os.Getenv(killedChildEnv)
	if path == "" {
		t.Skip("run by TestExecutorKilledMidRun")
	}
	f := readFixture(t, os.Getenv(killedFixtureEnv))
	l, err := receipts.Open(context.Background(), path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{Ledger: l}
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(600)"}
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a-value", "acme/beta": "b-value"})
	c.Budgets = invoke.Budgets{TimeoutMS: 60000}
	_, err = e.Run(context.Background(), c)
	t.Fatalf("the run was not killed: %v", err)
}

// TestExecutorKilledMidRun: an executor SIGKILLed while its container
// runs leaves the intent an orphan in the ledger, and a container that
// still runs (podman's own backstop ends it at the budget plus 7 s). An executor started right after it (a supervisor restarting
// it) prunes it at its first run: the dead executor's container is
// removed, running or not, and the new run works. Before, Prune took
// only stopped containers, once per process: one still in its budget
// when the new executor started stayed, stopped, until another process
// started.
func TestExecutorKilledMidRun(t *testing.T) {
	f := fixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "receipts.jsonl")
	// The child runs on the parent's fixture and in a temporary directory
	// of its own, which the parent removes: killed, it removes nothing
	// itself, and it left a fixture it built (cruxprov-podman-fx-*, the
	// cruxshim it built, cruxprov-image-shim-*) and its run's directory
	// (cruxprov-run-*, which a later executor's Prune takes only once it
	// is older than a pull may last: prune_pull_test.go) in the temporary
	// directory on every run of the tests. Made by MkdirTemp beside the
	// others, not in t.TempDir(), whose uppercase test name podman takes
	// as no image name (stagingDirs).
	tmp, err := os.MkdirTemp("", "cruxprov-podman-killed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	child := exec.Command(os.Args[0], "-test.run=^TestExecutorKilledMidRunChild$", "-test.count=1")
	child.Env = append(os.Environ(), killedChildEnv+"="+path, killedFixtureEnv+"="+writeFixture(t, f, dir), "TMPDIR="+tmp)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	id := ownerOf(t, child.Process.Pid)
	e := &Executor{}
	name := runningContainer(ctx, e, id)
	if name == "" {
		child.Process.Kill()
		t.Fatal("the executor's container never ran")
	}
	t.Cleanup(func() { e.podmanOut(context.Background(), "rm", "--force", "--time", "0", "--ignore", name) })
	child.Process.Signal(syscall.SIGKILL)
	<-exited

	r, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Attempts) != 1 || len(r.Orphans) != 1 || !strings.HasPrefix(name, "cruxprov-"+r.Orphans[0].Intent.AttemptID+"-") {
		t.Fatalf("ledger: %d attempts, orphans %+v; want the killed run's intent, an orphan (container %s)", len(r.Attempts), r.Orphans, name)
	}

	gone, err := e.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != name {
		t.Errorf("pruned %v, want the dead executor's running container %s", gone, name)
	}
	if _, err := e.podmanOut(ctx, "container", "exists", name); err == nil {
		t.Errorf("the dead executor's container %s is still there", name)
	}
	res, err := e.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a-value", "acme/beta": "b-value"}))
	if err != nil || res.Status != invoke.StatusOK {
		t.Fatalf("the next run: %v %+v", err, res)
	}
}

// ownerOf is LabelExecutor's id of process pid, once it has one.
func ownerOf(t *testing.T, pid int) string {
	t.Helper()
	ns, _, _ := strings.Cut(ownerID(), ":")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if start, ok := startTime(pid); ok {
			return ns + ":" + strconv.Itoa(pid) + ":" + start
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start time for pid %d", pid)
		}
	}
}

package podman

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// TestLimitsHold: a provider that goes past each container limit is
// stopped by it, and the run's outcome says what happened. Past the
// memory it is killed (SIGKILL, exit 137: an error outcome, not ok,
// whose message says the provider ran out of memory, and at which limit);
// past the pids limit fork fails (EAGAIN) before 128 processes; past the
// workdir's 64 MiB, and anywhere else on the file system but /dev/shm,
// a write fails. The outcomes are in the ledger as returned.
func TestLimitsHold(t *testing.T) {
	f := fixture(t)
	if !limitsApply(t) {
		t.Skip("this podman does not apply the cgroup limits (rootless on cgroups v1)")
	}
	const head = "import sys, json, os, time\nreq = json.loads(sys.stdin.readline())\n"
	const tail = "\nprint(json.dumps({\"status\": \"ok\", \"run_id\": req[\"run_id\"], \"result\": out, \"egress\": []}))\n"
	l, path := tempLedger(t)
	var runs []*invoke.Result
	run := func(t *testing.T, body string) *invoke.Result {
		t.Helper()
		e := &Executor{Ledger: l}
		e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", head + body + tail}
		res, err := e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "alpha-value", "acme/beta": "beta-value"}))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res)
		return res
	}
	t.Run("memory", func(t *testing.T) {
		// conmon writes an empty "oom" file into the podman client's
		// working directory: the executor's must stay as it was.
		cwd := t.TempDir()
		t.Chdir(cwd)
		res := run(t, "b = [bytearray(1 << 20) for _ in range(1024)]\nout = len(b)")
		// podman's State.OOMKilled stays false here (runc): before, the
		// receipt said only "killed by SIGKILL (killed; exit status 137)".
		if res.Status != invoke.StatusError || res.ExitCode != 137 || res.Error == nil || res.Error.Code != invoke.CodeExited ||
			!strings.HasPrefix(res.Error.Message, "the provider ran out of memory: the kernel killed it at the container's memory limit, 256 MiB (exit status 137);") {
			t.Fatalf("a provider allocating 1 GiB under a 256 MiB limit: %s, exit %d, %+v; want killed (137), out of memory", res.Status, res.ExitCode, res.Error)
		}
		if left, _ := os.ReadDir(cwd); len(left) != 0 {
			t.Errorf("the run left %v in the executor's working directory", left)
		}
	})
	t.Run("memory of a child", func(t *testing.T) {
		// A child killed for memory, the harness exiting 3 after it:
		// the exit is the harness's, the cause the memory limit.
		res := run(t, `
pid = os.fork()
if pid == 0:
    b = [bytearray(1 << 20) for _ in range(1024)]
    os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit(3 if os.WIFSIGNALED(st) else 4)
out = None`)
		if res.Status != invoke.StatusError || res.ExitCode != 3 || res.Error == nil || res.Error.Code != invoke.CodeExited ||
			!strings.HasPrefix(res.Error.Message, "the provider ran out of memory: the harness exited 3 after the kernel killed a process of the run at the container's memory limit, 256 MiB;") {
			t.Fatalf("a provider whose child allocates 1 GiB: %s, exit %d, %+v; want exit 3, out of memory", res.Status, res.ExitCode, res.Error)
		}
	})
	t.Run("pids", func(t *testing.T) {
		res := run(t, `
n, err = 0, ""
try:
    for i in range(400):
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    err = e.strerror
out = {"n": n, "err": err}`)
		var v struct {
			N   int    `json:"n"`
			Err string `json:"err"`
		}
		if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &v) != nil || v.N >= 128 || v.Err == "" {
			t.Fatalf("a fork bomb: %s %+v %s; want forks refused before 128 processes", res.Status, res.Error, res.Value)
		}
	})
	t.Run("files", func(t *testing.T) {
		res := run(t, `
out = {}
for d in ["/work", "/tmp", "/var/tmp", "/run", "/"]:
    n, err = 0, ""
    try:
        with open(d.rstrip("/") + "/fill", "wb") as fh:
            for i in range(100):
                fh.write(b"x" * (1 << 20)); fh.flush(); n += 1
    except OSError as e:
        err = e.strerror
    out[d] = [n, err]`)
		var v map[string][2]any
		if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &v) != nil {
			t.Fatalf("%s %+v %s", res.Status, res.Error, res.Value)
		}
		for d, got := range v {
			n, _ := got[0].(float64)
			if d == "/work" && (n != 64 || !strings.Contains(got[1].(string), "No space")) || d != "/work" && n != 0 {
				t.Errorf("%s: %v MiB written (%v); want the workdir full at 64 MiB, nothing elsewhere", d, n, got[1])
			}
		}
	})
	r, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Attempts) != len(runs) || len(r.Orphans) != 0 {
		t.Fatalf("ledger: %d attempts, %d orphans; want %d with outcomes", len(r.Attempts), len(r.Orphans), len(runs))
	}
	for i, a := range r.Attempts {
		if o := a.Outcome; o.Status != string(runs[i].Status) || o.ExitCode != runs[i].ExitCode {
			t.Errorf("the ledger's outcome %+v, the run's %s, exit %d", o, runs[i].Status, runs[i].ExitCode)
		}
	}
}

// limitsApply says whether the cgroup limits hold for this process's
// podman: root's always does.
func limitsApply(t *testing.T) bool {
	t.Helper()
	lost, err := (&Executor{UnenforcedLimits: true}).cgroupLimits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(lost) == 0
}

// TestCgroupsV1Shortcut: where /sys/fs/cgroup is not a cgroup2 mount,
// the limits a rootless podman leaves unapplied are known without
// podman info, and said in podman info's answer's words; on cgroups v2,
// or for a remote podman (whose host's cgroups count), podman is asked.
func TestCgroupsV1Shortcut(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		t.Skipf("statfs /sys/fs/cgroup: %v", err)
	}
	v1 := st.Type != unix.CGROUP2_SUPER_MAGIC
	got, ok := (&Executor{}).cgroupsV1()
	if ok != v1 {
		t.Fatalf("cgroups v1 %v, answered without podman info %v", v1, ok)
	}
	if v1 {
		want, err := readCgroups("true v1 ")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.limits, want.limits) || got.why != want.why {
			t.Errorf("without podman info %+v, from its answer %+v", got, want)
		}
	}
	for _, kv := range []string{"CONTAINER_HOST=unix:///run/podman/podman.sock", "CONTAINER_CONNECTION=remote"} {
		if _, ok := (&Executor{Environ: []string{DefaultPath, kv}}).cgroupsV1(); ok {
			t.Errorf("%s: answered without asking the remote podman", kv)
		}
	}
}

package podman

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
)

// TestShmAndNamespacesAreTheRuns: /dev/shm is writable (Python's
// multiprocessing needs it), 64 MiB, the container's own (nothing of the
// host's, nothing of an earlier run's), and counted against --memory; the
// IPC, pid and UTS namespaces are the container's own, whatever
// containers.conf says. Before, podman took them from containers.conf:
// with ipcns, pidns and utsns = "host" and shm_size = "1g" (here through
// CONTAINERS_CONF) a provider listed and wrote the host's /dev/shm (which
// outlives the run), saw every process of the host, and its hostname.
func TestShmAndNamespacesAreTheRuns(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\nipcns = \"host\"\npidns = \"host\"\nutsns = \"host\"\nshm_size = \"1g\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	const head = "import sys, json, os, socket\nreq = json.loads(sys.stdin.readline())\n"
	const tail = "\nprint(json.dumps({\"status\": \"ok\", \"run_id\": req[\"run_id\"], \"result\": out, \"egress\": []}))\n"
	run := func(body string) *invoke.Result {
		t.Helper()
		e := &Executor{Environ: []string{DefaultPath, "CONTAINERS_CONF=" + conf}}
		e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", head + body + tail}
		res, err := e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(`
before = sorted(os.listdir("/dev/shm"))
n, err = 0, ""
try:
    with open("/dev/shm/fill", "wb") as fh:
        for i in range(100):
            fh.write(b"x" * (1 << 20)); fh.flush(); n += 1
except OSError as e:
    err = e.strerror
out = {"before": before, "n": n, "err": err, "ipc": os.readlink("/proc/self/ns/ipc"), "hostname": socket.gethostname(),
       "procs": len([p for p in os.listdir("/proc") if p.isdigit()])}`)
	var v struct {
		Before   []string `json:"before"`
		N        int      `json:"n"`
		Err      string   `json:"err"`
		IPC      string   `json:"ipc"`
		Hostname string   `json:"hostname"`
		Procs    int      `json:"procs"`
	}
	if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &v) != nil {
		t.Fatalf("%s %+v %s", res.Status, res.Error, res.Value)
	}
	if len(v.Before) != 0 || v.IPC == hostIPC {
		t.Errorf("/dev/shm held %v, IPC namespace %s (the host's %s): want an empty /dev/shm of the container's own", v.Before, v.IPC, hostIPC)
	}
	if v.N != 64 || !strings.Contains(v.Err, "No space") {
		t.Errorf("%d MiB written to /dev/shm (%s); want it full at 64 MiB", v.N, v.Err)
	}
	if v.Hostname == host || v.Procs > 4 {
		t.Errorf("hostname %q (the host's %q), %d processes seen: want the container's own UTS and pid namespaces", v.Hostname, host, v.Procs)
	}

	// What a run leaves in /dev/shm is gone with it.
	res = run(`out = sorted(os.listdir("/dev/shm"))`)
	if res.Status != invoke.StatusOK || string(res.Value) != "[]" {
		t.Errorf("the next run's /dev/shm: %s %+v %s; want it empty", res.Status, res.Error, res.Value)
	}

	// /dev/shm counts against --memory: 200 MiB held, then /dev/shm
	// filled, is past 256 MiB.
	if !limitsApply(t) {
		return
	}
	res = run(`
b = [bytearray(1 << 20) for _ in range(200)]
with open("/dev/shm/fill", "wb") as fh:
    for i in range(64):
        fh.write(b"x" * (1 << 20)); fh.flush()
out = len(b)`)
	if res.Status != invoke.StatusError || res.Error == nil || !strings.HasPrefix(res.Error.Message, "the provider ran out of memory") {
		t.Errorf("200 MiB held and 64 MiB in /dev/shm under a 256 MiB limit: %s %+v; want out of memory", res.Status, res.Error)
	}
}

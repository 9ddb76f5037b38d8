package podman

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/refusal"
)

var (
	fxOnce sync.Once
	fx     *invoketest.Container
	fxErr  error
	fxDir  string
)

// usable skips t where podman cannot run containers here.
func usable(t testing.TB) {
	t.Helper()
	installed(t)
	if os.Getuid() != 0 {
		// Where rootless podman would ignore the limits the executor
		// refuses every run; TestRootless (as root) runs the battery
		// rootless with UnenforcedLimits.
		if _, err := (&Executor{}).cgroupLimits(context.Background()); err != nil {
			t.Skipf("%v: run as root (TestRootless then runs the battery as a rootless user)", err)
		}
	}
}

// installed skips t where podman cannot pull images here (rootless,
// it may pull where the executor would refuse to run: usable).
func installed(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed (apt-get install podman runc): no container executor to test")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed (apt-get install runc): crun fails in this VM, the executor uses runc")
	}
	if os.Getuid() != 0 {
		if b, err := os.ReadFile("/etc/subuid"); err != nil || len(strings.TrimSpace(string(b))) == 0 {
			t.Skip("rootless podman needs subordinate ids (/etc/subuid, /etc/subgid) and there are none: run as root")
		}
	}
}

// fixture is the hostile provider's signed image, built once per binary
// on the cached bookworm base.
func fixture(t testing.TB) *invoketest.Container {
	t.Helper()
	usable(t)
	dir, h := imagetest.Base(t)
	shimPath := imagetest.Shim(t)
	fxOnce.Do(func() {
		if fxDir, fxErr = os.MkdirTemp("", "cruxprov-podman-fx-"); fxErr != nil {
			return
		}
		fx, fxErr = invoketest.BuildContainer(context.Background(), fxDir, image.LayoutPrefix+dir+"@"+h.String(), shimPath, imagetest.Platform)
	})
	if fxErr != nil {
		t.Fatal(fxErr)
	}
	return fx
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{fxDir, baseFxDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	imagetest.Cleanup()
	os.Exit(code)
}

func TestBattery(t *testing.T) {
	f := fixture(t)
	invoketest.Run(t, func(t *testing.T, l invoke.Ledger) invoke.Executor { return &Executor{Ledger: l} }, f.Fixtures)
}

// TestHarnessBehindShimInit: in a container cruxshim is pid 1 and stays as
// the init, so the harness (not pid 1) does not fork one of its own (~50 ms
// of copy-on-write faults a run): its parent is cruxshim, and the run's
// orphans are reaped.
func TestHarnessBehindShimInit(t *testing.T) {
	harnessBehindShimInit(t, &Executor{}, fixture(t))
}

func harnessBehindShimInit(t *testing.T, e *Executor, f *invoketest.Container) {
	t.Helper()
	res, err := e.Run(context.Background(), f.Call("orphan", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Reaped bool   `json:"reaped"`
		Parent string `json:"parent"`
	}
	if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &v) != nil {
		t.Fatalf("%+v %+v %s", res, res.Error, res.Value)
	}
	if !v.Reaped || v.Parent != "cruxshim" {
		t.Errorf("reaped %v, the harness's parent %q; want the orphan reaped, the harness behind cruxshim", v.Reaped, v.Parent)
	}
}

// probe runs the probe entrypoint with the battery's secrets.
func probe(t *testing.T, e *Executor, f *invoketest.Container) map[string]any {
	t.Helper()
	secrets := map[string]string{"acme/alpha": "alpha-value", "acme/beta": "beta-value"}
	res, err := e.Run(context.Background(), f.Call("probe", nil, secrets))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusOK {
		t.Fatalf("probe: %s %+v", res.Status, res.Error)
	}
	var p map[string]any
	if err := json.Unmarshal(res.Value, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretPathMode(t *testing.T) {
	f := fixture(t)
	if os.Getuid() != 0 {
		t.Skip("path mode mounts a private tmpfs: it needs root")
	}
	p := probe(t, &Executor{SecretMode: SecretPath, SecretDir: t.TempDir()}, f)
	got, _ := p["secrets"].(map[string]any)
	if len(got) != 2 {
		t.Fatalf("secrets delivered by path: %v", p["secrets"])
	}
}

// TestContainment proves what only a container can: no network but lo,
// a read-only root, nothing of the host's file system, no capabilities,
// not root inside, limits applied. The probe is a script run instead of
// the harness under exactly the executor's podman flags.
func TestContainment(t *testing.T) {
	containment(t, &Executor{}, fixture(t), true)
}

// containment runs TestContainment's probe with e's settings; limits
// says whether the cgroup limits are expected to hold (pids.max).
func containment(t *testing.T, base *Executor, f *invoketest.Container, limits bool) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "host-only-marker")
	if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import json, os, socket, sys
req = json.loads(sys.stdin.readline())
def writable(p):
    try:
        with open(p, "w") as f: f.write("x")
        return True
    except OSError:
        return False
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
out = {
  "interfaces": sorted(n for _, n in socket.if_nameindex()),
  "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(), "no_new_privs": status.get("NoNewPrivs", "").strip(),
  "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
  "root_writable": writable("/probe"), "env_writable": writable("/opt/cruxprov/env/probe"),
  "work_writable": writable("/work/probe"),
  "tmp_writable": [d for d in ["/tmp", "/var/tmp", "/run", "/dev/mqueue"] if writable(d + "/probe")],
  "marker": os.path.exists(sys.argv[1]), "host_checkout": os.path.exists("/work/main/go.mod"),
  "pids_max": open("/sys/fs/cgroup/pids/pids.max").read().strip() if os.path.exists("/sys/fs/cgroup/pids/pids.max") else open("/sys/fs/cgroup/pids.max").read().strip() if os.path.exists("/sys/fs/cgroup/pids.max") else "",
  "mounts": [l.split()[1] + " " + l.split()[3] for l in open("/proc/self/mounts")],
  "core_limit": [l.split()[-3:-1] for l in open("/proc/self/limits") if l.startswith("Max core file size")],
}
print(json.dumps({"status": "ok", "run_id": req["run_id"], "result": out, "egress": []}))
`
	e := *base
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", script, marker}
	p := probe(t, &e, f)
	if fmtJSON(p["interfaces"]) != `["lo"]` {
		t.Errorf("network interfaces %v, want lo alone", p["interfaces"])
	}
	if p["cap_eff"] != "0000000000000000" || p["cap_bnd"] != "0000000000000000" {
		t.Errorf("capabilities: effective %v, bounding %v", p["cap_eff"], p["cap_bnd"])
	}
	if p["no_new_privs"] != "1" {
		t.Errorf("NoNewPrivs %v", p["no_new_privs"])
	}
	if p["uid"] != 65534.0 || p["euid"] != 65534.0 || p["gid"] != 65534.0 {
		t.Errorf("uid %v euid %v gid %v, want 65534", p["uid"], p["euid"], p["gid"])
	}
	if p["root_writable"] != false || p["env_writable"] != false {
		t.Errorf("the root file system is writable: / %v, env %v", p["root_writable"], p["env_writable"])
	}
	if p["work_writable"] != true {
		t.Errorf("the workdir is not writable")
	}
	// podman's --read-only mounts a tmpfs of no size of its own on /tmp,
	// /var/tmp and /run unless --read-only-tmpfs=false: a provider wrote
	// past the workdir's 64 MiB there (up to the memory limit).
	if fmtJSON(p["tmp_writable"]) != `[]` {
		t.Errorf("writable outside the workdir: %v", p["tmp_writable"])
	}
	if p["marker"] != false || p["host_checkout"] != false {
		t.Errorf("the host's files are visible: marker %v, checkout %v", p["marker"], p["host_checkout"])
	}
	if fmtJSON(p["core_limit"]) != `[["0","0"]]` {
		t.Errorf("core file size limit (soft, hard) %v, want 0 and 0: a core dump would hold the secret bundle", p["core_limit"])
	}
	if limits && p["pids_max"] != "128" {
		t.Errorf("pids.max %v, want 128", p["pids_max"])
	}
	for _, m := range p["mounts"].([]any) {
		s := m.(string)
		if strings.HasPrefix(s, "/ ") && !strings.Contains(s, "ro") {
			t.Errorf("root mount %q is not read-only", s)
		}
	}
}

func fmtJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestContainerRemoved: nothing of a run is left in podman afterwards.
func TestContainerRemoved(t *testing.T) {
	f := fixture(t)
	res, err := (&Executor{}).Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil || res.Status != invoke.StatusOK || res.AttemptID == "" {
		t.Fatalf("%+v %v", res, err)
	}
	// This run's container only (cruxprov-ATTEMPT-…): other tests' may be
	// running beside it.
	out, err := exec.Command("podman", "ps", "--all", "--filter", "name=cruxprov-"+res.AttemptID, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("containers left behind: %s", s)
	}
}

// TestOKRunReadsNoState: a run whose podman exits 0 is not followed by a
// podman container inspect (its state is known: it ran and exited 0),
// and its container is still removed; a run that ends otherwise still
// reads the container's state (the battery checks what it finds).
func TestOKRunReadsNoState(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "podman.log")
	real, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "podman")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$*\" >> "+log+"\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ex := &Executor{Podman: wrapper, UnenforcedLimits: !limitsApply(t)}
	calls := func() string { b, _ := os.ReadFile(log); os.Remove(log); return string(b) }

	res, err := ex.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil || res.Status != invoke.StatusOK {
		t.Fatalf("%+v %v", res, err)
	}
	got := calls()
	if strings.Contains(got, "container inspect") || !strings.Contains(got, " rm --force") {
		t.Errorf("an ok run ran podman:\n%s\nwant a rm and no container inspect", got)
	}
	attempts := []string{res.AttemptID}
	res, err = ex.Run(context.Background(), f.Call("crash", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(); !strings.Contains(got, "container inspect") {
		t.Errorf("a run that exited %d (%s) did not read the container's state:\n%s", res.ExitCode, res.Status, got)
	}
	// These runs' containers only: other tests' may be running beside.
	for _, a := range append(attempts, res.AttemptID) {
		out, err := exec.Command("podman", "ps", "--all", "--filter", "name=cruxprov-"+a, "--format", "{{.Names}}").Output()
		if a == "" || err != nil {
			t.Fatalf("attempt %q: %v", a, err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("containers left behind: %s", s)
		}
	}
}

func TestRefusals(t *testing.T) {
	f := fixture(t)
	for _, tc := range []struct {
		name string
		e    *Executor
		edit func(c *invoke.Call)
		code refusal.Code
	}{
		{"podman missing", &Executor{Podman: "/nonexistent/podman"}, nil, refusal.ContainerUnavailable},
		{"runtime missing", &Executor{Runtime: "/nonexistent/runtime"}, nil, refusal.ContainerUnavailable},
		{"image by tag", &Executor{}, func(c *invoke.Call) { c.Image = strings.Split(c.Image, "@")[0] }, refusal.ImageDigestMismatch},
		{"another digest", &Executor{}, func(c *invoke.Call) {
			c.Image = strings.Split(c.Image, "@")[0] + "@sha256:" + strings.Repeat("0", 64)
		}, refusal.ImageDigestMismatch},
		{"root inside", &Executor{User: "0:0"}, nil, refusal.ContainerUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
			if tc.edit != nil {
				tc.edit(c)
			}
			_, err := tc.e.Run(context.Background(), c)
			if refusal.CodeOf(err) != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
		})
	}
}

// TestTamperedLayout: a flipped byte in the pinned manifest is refused
// before podman sees it.
func TestTamperedLayout(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	if err := exec.Command("cp", "-a", f.Layout, dir).Run(); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(dir, filepath.Base(f.Layout))
	d := f.MaterializationDigest
	p := filepath.Join(layout, "blobs", "sha256", d.Hex())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Image = image.LayoutPrefix + layout + "@" + d.String()
	c.Verify = nil
	if _, err := (&Executor{}).Run(context.Background(), c); refusal.CodeOf(err) != refusal.ImageDigestMismatch {
		t.Fatalf("err %v, want image_digest_mismatch", err)
	}
}

// TestContainerOutlivesNoBudget: a run whose executor never signals it
// (killed mid-run) still ends at its budget: podman kills the container
// itself (run --timeout), backstopSeconds after the executor would have.
func TestContainerOutlivesNoBudget(t *testing.T) {
	f := fixture(t)
	e := &Executor{}
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(600)"}
	b := &backend{e: e}
	c := f.Call("probe", nil, nil)
	ctx := context.Background()
	if _, err := b.Check(ctx, c); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	start := time.Now()
	p, err := b.Start(ctx, &invoke.Spawn{Call: c, Attempt: "att_backstop", Request: []byte("{}\n"), Budgets: invoke.Budgets{TimeoutMS: 1000}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	limit := time.Duration(1+backstopSeconds+20) * time.Second
	select {
	case <-done:
		if d := time.Since(start); d < time.Second {
			t.Errorf("ended after %v, before its budget", d)
		}
		t.Logf("ended by podman after %v (budget 1 s)", time.Since(start).Round(100*time.Millisecond))
	case <-time.After(limit):
		p.Signal(false)
		<-done
		t.Fatalf("the container ran %v past its 1 s budget with no executor to kill it", limit)
	}
}

// TestPruneRemovesWhatDeadExecutorsLeft: a run's container carries its
// executor's id; Prune removes the stopped containers of executors that
// have exited, and keeps those of a live executor (this process) and of
// one it cannot judge (another pid namespace).
func TestPruneRemovesWhatDeadExecutorsLeft(t *testing.T) {
	f := fixture(t)
	ctx := context.Background()
	e := &Executor{}
	e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(600)"}
	b := &backend{e: e}
	c := f.Call("probe", nil, nil)
	if _, err := b.Check(ctx, c); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	p, err := b.Start(ctx, &invoke.Spawn{Call: c, Attempt: "att_label", Request: []byte("{}\n"), Budgets: invoke.Budgets{TimeoutMS: 60000}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err = e.podmanOut(ctx, "container", "inspect", "--format", "{{index .Config.Labels \""+LabelExecutor+"\"}}", p.(*process).name)
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	p.Signal(false)
	p.Wait()
	if err != nil || strings.TrimSpace(string(got)) != ownerID() || ownerID() == "" {
		t.Fatalf("a run's label %q (%v), want this executor's %q", got, err, ownerID())
	}

	// An executor that has exited: a process started, read and reaped.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := startTime(sleeper.Process.Pid)
	sleeper.Process.Kill()
	sleeper.Wait()
	ns, _, _ := strings.Cut(ownerID(), ":")
	if !ok {
		t.Fatal("no start time for a child")
	}
	owners := map[string]string{
		"dead":  fmt.Sprintf("%s:%d:%s", ns, sleeper.Process.Pid, start),
		"live":  ownerID(),
		"other": "1:1:1",                                 // another pid namespace
		"reuse": fmt.Sprintf("%s:%d:1", ns, os.Getpid()), // this pid, another start
	}
	names := map[string]string{}
	for k, id := range owners {
		names[k] = newName("att_prune_" + k)
		if _, err := e.podmanOut(ctx, "create", "--name", names[k], "--label", LabelExecutor+"="+id, "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "none", "--entrypoint", "/opt/cruxprov/env/bin/python", b.id, "-c", "pass"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.podmanOut(context.Background(), "rm", "--force", "--ignore", names[k]) })
	}
	// One of them has run and exited.
	if _, err := e.podmanOut(ctx, "start", "--attach", names["dead"]); err != nil {
		t.Fatal(err)
	}
	gone, err := e.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{names["dead"], names["reuse"]}
	slices.Sort(gone)
	slices.Sort(want)
	if !slices.Equal(gone, want) {
		t.Fatalf("pruned %v, want %v", gone, want)
	}
	for _, k := range []string{"live", "other"} {
		if _, err := e.podmanOut(ctx, "container", "exists", names[k]); err != nil {
			t.Errorf("the %s executor's container was removed: %v", k, err)
		}
	}
}

// TestReadCgroups: which limits a rootless podman would run without,
// read from podman info (this machine is cgroups v1, so the v2 answers
// are written out here as podman 4 prints them).
func TestReadCgroups(t *testing.T) {
	for _, tc := range []struct {
		info, lost string // lost: "" when every limit holds, "!" for a refusal of the answer itself
	}{
		{"false v1 cpuset,cpu,memory,pids,", ""},
		{"false v2 ", ""},
		{"true v1 ", "memory cpus pids"},
		{"true v2 cpuset,cpu,io,memory,hugetlb,pids,rdma,misc,", ""},
		{"true v2 memory,pids,", "cpus"},
		{"true v2 cpu,", "memory pids"},
		{"true v2", "memory cpus pids"},
		{"", "!"},
		{"Error: something", "!"},
		{"yes v2 memory,cpu,pids,", "!"},
		{"true v3 ", "!"},
	} {
		t.Run(tc.info, func(t *testing.T) {
			u, err := readCgroups(tc.info)
			if tc.lost == "!" {
				if refusal.CodeOf(err) != refusal.ContainerUnavailable {
					t.Fatalf("err %v, want container_unavailable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(u.limits, " "); got != tc.lost || (got != "" && u.why == "") {
				t.Errorf("limits %q (why %q), want %q", got, u.why, tc.lost)
			}
		})
	}
}

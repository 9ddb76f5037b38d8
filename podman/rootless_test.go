package podman

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// rootlessEnv names the file TestRootless hands its child: the
// fixture as the child runs it.
const rootlessEnv = "CRUXPROV_PODMAN_ROOTLESS_FIXTURE"

// childFixture is what a child of a test (the test binary re-run) needs
// of the parent's fixture: the Fixtures (Verify is rebuilt from the
// builder's public key) and the layout. A child that built its own was
// slower, and one killed by design (TestExecutorKilledMidRun) never
// removed what it built (TestMain does, at the end).
type childFixture struct {
	Fixtures  invoketest.Fixtures `json:"fixtures"`
	Layout    string              `json:"layout"`
	BuilderPK string              `json:"builder_pk"`
}

// writeFixture writes f as a child reads it (readFixture) into dir and
// returns the file's path.
func writeFixture(t *testing.T, f *invoketest.Container, dir string) string {
	t.Helper()
	fj, err := json.Marshal(childFixture{Fixtures: f.Fixtures, Layout: f.Layout, BuilderPK: string(f.Key.Public().PEM())})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fixture.json")
	if err := os.WriteFile(path, fj, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readFixture is the fixture writeFixture wrote at path.
func readFixture(t *testing.T, path string) *invoketest.Container {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cf childFixture
	if err := json.Unmarshal(b, &cf); err != nil {
		t.Fatal(err)
	}
	pub, err := sign.ParsePublicKey([]byte(cf.BuilderPK))
	if err != nil {
		t.Fatal(err)
	}
	ref := cf.Fixtures.Image
	cf.Fixtures.Verify = func(ctx context.Context) error {
		_, err := image.Verify(ctx, ref, image.VerifyOptions{Keys: []*sign.PublicKey{pub}, SkipBlobs: true,
			Expect: image.Expect{BuilderID: invoketest.BuilderID}})
		return err
	}
	return &invoketest.Container{Fixtures: cf.Fixtures, Layout: cf.Layout}
}

// TestRootless runs the conformance battery, a secret on fd 3 and the
// containment probe as a user who is not root, with rootless podman:
// the test binary re-executed under setpriv as a user the machine has
// subordinate ids for. Where rootless podman cannot apply the cgroup
// limits (cgroups v1) the executor's refusal is checked, and the rest
// runs with UnenforcedLimits.
func TestRootless(t *testing.T) {
	usable(t)
	asuser.Require(t, "switch to a rootless user (as a user with subordinate ids, TestBattery itself runs rootless)")
	u := asuser.Subid(t, os.Getenv("CRUXPROV_ROOTLESS_USER"))
	f := fixture(t)
	// The rootless user reads the fixture's layout (podman pulls it).
	if err := filepath.WalkDir(fxDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		add := fs.FileMode(0o044)
		if d.IsDir() || st.Mode()&0o100 != 0 {
			add = 0o055
		}
		return os.Chmod(p, st.Mode().Perm()|add)
	}); err != nil {
		t.Fatal(err)
	}
	work := asuser.Dir(t, "cruxprov-podman-rootless-")
	bin := asuser.CopySelf(t, work)
	fxFile := writeFixture(t, f, work)
	env := []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	// The child's runs pull the fixture into the user's own podman
	// storage, where it stayed after the test (90 MB in their home, for
	// good): it is removed, by its id (the config digest), as the cmd/
	// tests remove what they pulled; not --force: a container of it would
	// be a failure to see, not to hide.
	ref, err := image.ParseRef(f.Image)
	if err != nil {
		t.Fatal(err)
	}
	m, err := (&Executor{}).manifest(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rm := asuser.CommandInitGroups(u.UID, u.GID, "/usr/bin/podman", "rmi", "--ignore", m.Config.Digest.Hex)
		rm.Dir, rm.Env = u.Home, env
		if out, err := rm.CombinedOutput(); err != nil {
			t.Logf("removing the fixture image from %s's podman storage: %v\n%s", u.Name, err, out) // another run's container of it, the same test run at once
		}
	})
	cmd := asuser.CommandInitGroups(u.UID, u.GID, bin, "-test.run=^TestRootlessChild$", "-test.v", "-test.count=1")
	cmd.Dir = u.Home
	cmd.Env = append([]string{rootlessEnv + "=" + fxFile}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as %s (uid %d, rootless podman): %v\n%s", u.Name, u.UID, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestRootlessChild") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("as %s: the rootless run did not pass in full:\n%s", u.Name, out)
	}
	t.Logf("as %s (uid %d):\n%s", u.Name, u.UID, out)
}

// TestRootlessChild is TestRootless's child, as the rootless user.
func TestRootlessChild(t *testing.T) {
	fxFile := os.Getenv(rootlessEnv)
	if fxFile == "" {
		t.Skip("TestRootless runs it as a rootless user")
	}
	if os.Geteuid() == 0 {
		t.Fatal("the rootless child runs as root")
	}
	f := readFixture(t, fxFile)

	info, err := exec.Command("podman", "--runtime", "runc", "info", "--format",
		"{{.Host.Security.Rootless}} {{.Host.CgroupsVersion}} {{.Store.GraphDriverName}}").Output()
	if err != nil {
		t.Fatalf("podman info as uid %d: %v", os.Getuid(), err)
	}
	fields := strings.Fields(string(info))
	if len(fields) != 3 || fields[0] != "true" {
		t.Fatalf("podman is not rootless here: %q", info)
	}
	_, lerr := (&Executor{}).cgroupLimits(context.Background())
	limits := lerr == nil
	t.Logf("uid %d, rootless podman, cgroups %s, storage %s, limits enforced: %v", os.Getuid(), fields[1], fields[2], limits)

	// On cgroups v1 the executor answers without podman info (half a
	// second a run here), and says what podman info says.
	t.Run("CgroupsV1WithoutPodmanInfo", func(t *testing.T) {
		if fields[1] != "v1" {
			t.Skipf("cgroups %s: podman info is asked", fields[1])
		}
		e := &Executor{}
		asked, err := e.unappliedLimits(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		known, ok := e.cgroupsV1()
		if !ok || !slices.Equal(known.limits, asked.limits) || known.why != asked.why {
			t.Fatalf("without podman info: %+v (answered: %v); podman info: %+v", known, ok, asked)
		}
		// No podman is run for it: one that cannot be run still gets
		// the limits' refusal, not "cannot run podman".
		_, err = (&Executor{Podman: filepath.Join(t.TempDir(), "no-podman")}).cgroupLimits(context.Background())
		if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionUnenforcedLimits {
			t.Fatalf("with no podman to run: %v (remedy %+v), want the limits' refusal", err, rem)
		}
	})
	// By default the executor refuses a rootless podman that would
	// ignore the limits, before any container.
	t.Run("LimitsOrRefusal", func(t *testing.T) {
		_, err := (&Executor{}).Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		switch {
		case limits && err != nil:
			t.Fatalf("limits hold, yet: %v", err)
		case !limits && refusal.CodeOf(err) != refusal.ContainerUnavailable:
			t.Fatalf("rootless podman on cgroups %s ignores the limits; err %v, want container_unavailable", fields[1], err)
		case !limits:
			// The refusal offers the choice (cmd/ renders it as run
			// --unenforced-limits), which SecretOnFD3 on makes.
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionUnenforcedLimits {
				t.Fatalf("the refusal carries remedy %+v, want %s", rem, refusal.ActionUnenforcedLimits)
			}
		}
	})
	ex := &Executor{UnenforcedLimits: !limits}
	t.Run("SecretOnFD3", func(t *testing.T) {
		secrets := map[string]string{"acme/alpha": "alpha-value", "acme/beta": "beta-value"}
		p := probe(t, ex, f)
		got, _ := p["secrets"].(map[string]any)
		for ref, v := range secrets {
			h := sha256.Sum256([]byte(v))
			if got[ref] != hex.EncodeToString(h[:]) {
				t.Errorf("secret %s: the provider got %v", ref, got[ref])
			}
		}
	})
	t.Run("Containment", func(t *testing.T) { containment(t, ex, f, limits) })
	t.Run("HarnessBehindShimInit", func(t *testing.T) { harnessBehindShimInit(t, ex, f) })
	t.Run("Battery", func(t *testing.T) {
		invoketest.Run(t, func(t *testing.T, l invoke.Ledger) invoke.Executor {
			return &Executor{Ledger: l, UnenforcedLimits: !limits}
		}, f.Fixtures)
	})
	// Nothing of podman's own reaches the run's stderr: rootless on
	// cgroups v1, podman printed "Resource limits are not supported and
	// ignored on cgroups V1 rootless systems" on every run given
	// --memory, --cpus or --pids-limit, billed as the provider's stderr,
	// kept in its receipt's tail, and turning the shim's refusal (its one
	// stderr line and nothing else) into harness_exited "the harness
	// exited 78".
	t.Run("StderrIsTheRuns", func(t *testing.T) {
		e := &Executor{UnenforcedLimits: !limits}
		e.command = []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import sys, json; req = json.loads(sys.stdin.readline()); print(json.dumps({'status': 'ok', 'run_id': req['run_id'], 'result': 1, 'egress': []}))"}
		res, err := e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		if err != nil || res.Status != invoke.StatusOK || res.StderrBytes != 0 {
			t.Errorf("a run that writes nothing on stderr: %v %+v %+v, %d stderr bytes", err, res, res.Error, res.StderrBytes)
		}
		e.command = []string{"/nonexistent/harness"}
		res, err = e.Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		if err != nil || res.Error == nil || res.Error.Code != invoke.CodeShimRefused {
			t.Errorf("the shim cannot exec the harness: %v %+v %+v; want shim_refused", err, res, res.Error)
		}
	})
	t.Run("ClientKilled", func(t *testing.T) { clientKilled(t, &Executor{UnenforcedLimits: !limits}, f) })
	t.Run("DrainBoundFailsTheRun", func(t *testing.T) { drainBoundFails(t, &Executor{UnenforcedLimits: !limits}, f) })
	t.Run("OutputLimitStopsTheContainer", func(t *testing.T) { outputLimitStops(t, &Executor{UnenforcedLimits: !limits}, f) })
	t.Run("TimeoutExitZeroSaysSo", func(t *testing.T) { timeoutExitZero(t, &Executor{UnenforcedLimits: !limits}, f) })
	t.Run("Pid1DropsSIGTERM", func(t *testing.T) { pid1DropsSIGTERM(t, &Executor{UnenforcedLimits: !limits}, f) })
	t.Run("ContainerRemoved", func(t *testing.T) {
		out, err := exec.Command("podman", "ps", "--all", "--filter", "name=cruxprov-", "--format", "{{.Names}}").Output()
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("containers left behind: %s", s)
		}
	})
	// A ledger the rootless executor owns records its runs.
	t.Run("Ledger", func(t *testing.T) {
		l, path := tempLedger(t)
		res, err := (&Executor{Ledger: l, UnenforcedLimits: !limits}).Run(context.Background(), f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		if err != nil || res.Status != invoke.StatusOK {
			t.Fatalf("probe: %v %+v", err, res)
		}
		st, err := os.Stat(path)
		if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			t.Errorf("the ledger %s is not the rootless user's: %v", path, err)
		}
		// The receipt says which limits the run went without.
		sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
		if err != nil || len(sr.Attempts) != 1 {
			t.Fatalf("scan: %v %+v", err, sr)
		}
		want := []string{"memory", "cpus", "pids"}
		if limits {
			want = nil
		}
		if got := sr.Attempts[0].Intent.Unenforced; !slices.Equal(got, want) {
			t.Errorf("the intent's unenforced limits: %q, want %q", got, want)
		}
	})
}

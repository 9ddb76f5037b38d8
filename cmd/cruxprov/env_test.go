package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// envPython is the real interpreter (python3 on PATH is a pyenv shim
// here): pyenv's 3.11 where it exists, else Debian's.
var envPython = func() string {
	for _, p := range []string{"/root/.pyenv/versions/3.11.7/bin/python3.11", "/usr/bin/python3.11"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/usr/bin/python3"
}()

// envHome makes a store holding n small wheels (files each) and a bare
// lock naming them; it returns the home and the lock's path.
func envHome(t *testing.T, n, filesPer int) (home, lock string) {
	t.Helper()
	return envHomeAt(t, t.TempDir(), n, filesPer)
}

// envHomeAt is envHome with the home at a given directory.
func envHomeAt(t *testing.T, home string, n, filesPer int) (string, string) {
	t.Helper()
	return envHomeWith(t, home, n, filesPer, 50)
}

// envHomeWith is envHomeAt with each module's line repeated lines times
// (50 there: about 400 bytes a module).
func envHomeWith(t *testing.T, home string, n, filesPer, lines int) (string, string) {
	t.Helper()
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	t.Cleanup(func() { testdir.Writable(home) })
	st, err := store.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	var lb strings.Builder
	lb.WriteString("lock-version = \"1.0\"\ncreated-by = \"cruxprov env tests\"\nrequires-python = \">=3.9\"\n")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pkg%c", 'a'+i)
		fn := name + "-1.0-py3-none-any.whl"
		es := []wheel.Entry{
			{Name: name + "-1.0.dist-info/WHEEL", Data: []byte("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")},
			{Name: name + "-1.0.dist-info/METADATA", Data: []byte("Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n")},
			{Name: name + "-1.0.dist-info/entry_points.txt", Data: []byte("[console_scripts]\n" + name + "-cli = " + name + ":main\n")},
			{Name: name + "/__init__.py", Data: []byte("def main():\n    print('" + name + "')\n")},
		}
		for j := 0; j < filesPer; j++ {
			es = append(es, wheel.Entry{Name: fmt.Sprintf("%s/sub%d/mod%d.py", name, j%7, j), Data: bytes.Repeat([]byte(fmt.Sprintf("x%d = %d\n", j, j)), lines)})
		}
		var buf bytes.Buffer
		if err := wheel.Write(&buf, fn, es); err != nil {
			t.Fatal(err)
		}
		d := digest.Sum(buf.Bytes())
		if err := st.Put(context.Background(), d, int64(buf.Len()), bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&lb, "\n[[packages]]\nname = %q\nversion = \"1.0\"\nwheels = [{ url = \"http://127.0.0.1:9/files/%s\", size = %d, hashes = { sha256 = %q } }]\n", name, fn, buf.Len(), d.Hex())
	}
	lock := filepath.Join(t.TempDir(), "pylock.toml")
	if err := os.WriteFile(lock, []byte(lb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, lock
}

func createArgs(home, lock string, extra ...string) []string {
	return append([]string{"--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", envPython, "--offline", "--json"}, extra...)
}

// createJSON runs env create and decodes its output.
func createJSON(t *testing.T, args ...string) envCreated {
	t.Helper()
	r := cruxprov(t, args...)
	if r.code != 0 {
		t.Fatalf("env create: %+v", r)
	}
	return createdOf(t, r)
}

// createdOf decodes env create's (or env verify's) --json document.
func createdOf(t *testing.T, r result) envCreated {
	t.Helper()
	var out envCreated
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	return out
}

func TestEnvCreateVerifyList(t *testing.T) {
	home, lock := envHome(t, 3, 20)
	out := createJSON(t, createArgs(home, lock, "--no-compile")...)
	if out.Path != filepath.Join(home, "envs", out.Digest.Hex()) || out.Reused || out.Packages != 3 || out.TreeDigest.IsZero() {
		t.Fatalf("%+v", out)
	}
	// The text says the three digests --json carries: the seal content
	// digest, which an operator compares with a CI record or a pin, was
	// left out of it.
	digests := fmt.Sprintf("\nmaterialization_digest %s\ntree_digest %s\nseal_content_digest %s\n", out.Digest, out.TreeDigest, out.ContentDigest)
	for _, args := range [][]string{{"env", "verify", out.Path}, {"env", "verify", out.Path, "--deep"}, {"env", "verify", "--deep", out.Path, "--json"}} {
		r := cruxprov(t, append([]string{"--home", home}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		if args[len(args)-1] == "--json" {
			if v := createdOf(t, r); v.Digest != out.Digest || v.TreeDigest != out.TreeDigest || v.ContentDigest != out.ContentDigest || out.ContentDigest.IsZero() {
				t.Errorf("%v: %+v, want the digests env create reported (%+v)", args, v, out)
			}
		} else if !strings.Contains(r.stdout, digests) {
			t.Errorf("%v: %q, want the lines %q", args, r.stdout, digests)
		}
	}
	r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep", "--json")
	var v map[string]any
	if json.Unmarshal([]byte(r.stdout), &v) != nil || v["mode"] != "deep" || v["schema"] != "cruxprov.env.verify/v1" {
		t.Fatalf("--deep after the path must be honoured: %s", r.stdout)
	}
	r = cruxprov(t, "--home", home, "env", "list", "--json")
	var l struct {
		Envs []envListed `json:"envs"`
	}
	if json.Unmarshal([]byte(r.stdout), &l) != nil || len(l.Envs) != 1 || l.Envs[0].Digest != out.Digest || !l.Envs[0].Sealed {
		t.Fatalf("list: %+v", r)
	}
	// Reused on the second create.
	if again := createJSON(t, createArgs(home, lock, "--no-compile")...); !again.Reused || again.TreeDigest != out.TreeDigest {
		t.Fatalf("second create: %+v", again)
	}
	// Drift is refused with exit 78 and its code, and --explain lists all.
	sp := filepath.Join(out.Path, "lib", "python3.11", "site-packages")
	os.Chmod(sp+"/pkga", 0o755)
	// Its name is the tamperer's to choose: a terminal escape in it
	// (set the window title, ring the bell) must be shown, not obeyed.
	os.WriteFile(sp+"/pkga/extra\x1b]0;owned\x07.py", []byte("x\n"), 0o644)
	os.Chmod(sp+"/pkga/__init__.py", 0o644)
	r = cruxprov(t, "--home", home, "env", "verify", out.Path, "--json")
	var ref struct {
		Refused struct{ Code, Detail string } `json:"refused"`
	}
	if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &ref) != nil || ref.Refused.Code != string(refusal.EnvDrift) {
		t.Fatalf("drift: %+v", r)
	}
	r = cruxprov(t, "--home", home, "env", "verify", out.Path, "--explain")
	if r.code != exitRefused || strings.Count(r.stdout, "drift: ") != 3 || !strings.Contains(r.stderr, "env_drift") {
		t.Fatalf("explain: %+v", r)
	}
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") || !strings.Contains(r.stdout, `drift: lib/python3.11/site-packages/pkga/extra\x1b]0;owned\x07.py: added`) {
		t.Errorf("explain shows the tamperer's name as it is: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "3 differences") || !strings.Contains(r.stderr, "to fix: cruxprov env create --replace "+out.Path) { // what to do next, too
		t.Fatalf("explain does not say what to do next: %+v", r)
	}
	// --explain --json carries the differences as an array on refusal
	// too, sorted by path.
	r = cruxprov(t, "--home", home, "env", "verify", out.Path, "--explain", "--json", "--deep")
	var exp struct {
		OK          bool
		Mode        string // as the ok document's (it had none)
		Differences []struct{ Path, Change string }
		Refused     struct{ Code string }
	}
	if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &exp) != nil || exp.OK || exp.Mode != "deep" || exp.Refused.Code != string(refusal.EnvDrift) || len(exp.Differences) != 3 {
		t.Fatalf("explain --json: %+v", r)
	}
	// Its stderr line says what to do next, as without --json.
	if !strings.Contains(r.stderr, "to fix: cruxprov env create --replace "+out.Path) {
		t.Errorf("explain --json: the refusal line on stderr has no \"to fix\": %q", r.stderr)
	}
	for i := 1; i < len(exp.Differences); i++ {
		if exp.Differences[i-1].Path > exp.Differences[i].Path {
			t.Errorf("differences not sorted by path: %+v", exp.Differences)
		}
	}
	// The advised command works: the env is rebuilt under its digest.
	if r := cruxprov(t, "--home", home, "env", "create", "--replace", out.Path, "--offline"); r.code != 0 {
		t.Fatalf("env create --replace ENV: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
		t.Fatalf("verify after --replace: %+v", r)
	}
	// Usage errors.
	for _, u := range []struct {
		name string
		args []string
	}{
		{"create without lock or wheel", []string{"env", "create", "--platform", "host", "--offline"}},
		{"create with lock and wheel", []string{"env", "create", "--lock", lock, "--wheel", "x.whl", "--platform", "host", "--offline"}},
		{"create without platform", []string{"env", "create", "--lock", lock, "--offline"}},
		{"create online without index", []string{"env", "create", "--lock", lock, "--platform", "host"}},
		{"verify without env", []string{"env", "verify"}},
	} {
		t.Run(u.name, func(t *testing.T) {
			if r := cruxprov(t, append([]string{"--home", home}, u.args...)...); r.code != exitUsage {
				t.Errorf("%v: %+v", u.args, r)
			}
		})
	}
}

// TestEnvVerifyNegativeJobs: env verify --jobs -3 is a usage error as it
// is for fetch and env create; it was accepted silently.
func TestEnvVerifyNegativeJobs(t *testing.T) {
	r := cruxprov(t, "env", "verify", t.TempDir(), "--jobs", "-3")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--jobs") {
		t.Errorf("%+v", r)
	}
}

// TestEnvListCountsTheRoot: env list reports the same package count as
// env create for an env made from a root wheel; it left the root out ("1
// packages" for an env create called "2 packages").
func TestEnvListCountsTheRoot(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx, index := echoIndex(t)
	home := testdir.New(t)
	out := createJSON(t, "--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", index, "--no-compile", "--json")
	var list struct {
		Envs []envListed `json:"envs"`
	}
	r := cruxprov(t, "--home", home, "env", "list", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Envs) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if got := list.Envs[0].Packages; got != out.Packages {
		t.Errorf("env list says %d packages, env create %d", got, out.Packages)
	}
}

// TestEnvCreateRefusesNonUTF8Home: an env under a home whose path is not
// UTF-8 is refused before anything is written: Python cannot start a venv
// there (site.py cannot decode pyvenv.cfg; python -m venv refuses too).
// env create reported such an env created and verify called it ok.
func TestEnvCreateRefusesNonUTF8Home(t *testing.T) {
	home := filepath.Join(t.TempDir(), "bad\xffdir")
	r := cruxprov(t, "--home", home, "env", "create", "--lock", "pylock.toml", "--platform", fetchTestPlatform, "--offline", "--json")
	v := jsonDoc(t, r)
	if ref, _ := v["refused"].(map[string]any); r.code != exitRefused || ref["code"] != "materialize_failed" || !strings.Contains(r.stderr, "UTF-8") {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(home); err == nil {
		t.Errorf("%q was created", home)
	}
}

// TestEnvCreateCrashSafety SIGKILLs env create at random points: verify
// never accepts a partial env, and the next create always completes with
// the same tree.
func TestEnvCreateCrashSafety(t *testing.T) {
	home, lock := envHome(t, 3, 250)
	args := createArgs(home, lock, "--no-compile")
	ref := createJSON(t, args...) // warms the interpreter probe cache
	removeEnv := func() {
		testdir.Writable(filepath.Join(home, "envs"))
		for _, p := range []string{ref.Path, seal.SealPath(ref.Path), seal.StatIndexPath(ref.Path)} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	removeEnv()
	t0 := time.Now()
	createJSON(t, args...)
	took := time.Since(t0)
	removeEnv()
	trials := 50
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(1, seed))
	outcomes := map[string]int{}
	for i := 0; i < trials; i++ {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+home)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(took) * 5 / 4)))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		_, serr := os.Stat(seal.SealPath(ref.Path))
		rep, err := seal.Verify(context.Background(), ref.Path, seal.Options{})
		switch {
		case serr == nil:
			// Sealed before the kill: it must be the whole env.
			if err != nil {
				t.Fatalf("trial %d: a sealed env fails verify: %v", i, err)
			}
			if _, err := seal.Verify(context.Background(), ref.Path, seal.Options{Deep: true}); err != nil || rep.TreeDigest != ref.TreeDigest {
				t.Fatalf("trial %d: sealed env differs from the reference: %v", i, err)
			}
			outcomes["sealed"]++
		case err == nil:
			t.Fatalf("trial %d: verify accepted an env without a seal", i)
		default:
			if !errorsIs(err, refusal.SealMissing) && !errorsIs(err, refusal.EnvDrift) {
				t.Fatalf("trial %d: unexpected refusal %v", i, err)
			}
			if _, err := os.Stat(ref.Path); err == nil {
				outcomes["unsealed dir"]++
			} else {
				outcomes["nothing"]++
			}
		}
		next := createJSON(t, args...)
		if next.TreeDigest != ref.TreeDigest || next.Path != ref.Path {
			t.Fatalf("trial %d: the next create made %+v, want tree %s", i, next, ref.TreeDigest)
		}
		tmp, _ := os.ReadDir(filepath.Join(home, "tmp"))
		if len(tmp) != 0 {
			t.Fatalf("trial %d: staging debris after a completed create: %v", i, tmp)
		}
		removeEnv()
	}
	t.Logf("%d trials (create takes %v): %v", trials, took, outcomes)
}

func errorsIs(err error, c refusal.Code) bool { return refusal.CodeOf(err) == c }

// TestEnvCreateConcurrent: two creates of one pin at once make one env.
func TestEnvCreateConcurrent(t *testing.T) {
	home, lock := envHome(t, 3, 100)
	args := createArgs(home, lock, "--no-compile")
	var wg sync.WaitGroup
	rs := make([]result, 2)
	for i := range rs {
		wg.Go(func() { rs[i] = cruxprov(t, args...) })
	}
	wg.Wait()
	outs := make([]envCreated, 2)
	for i, r := range rs {
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &outs[i]) != nil {
			t.Fatalf("create %d: %+v", i, r)
		}
	}
	if outs[0].Path != outs[1].Path || outs[0].TreeDigest != outs[1].TreeDigest || outs[0].Reused == outs[1].Reused {
		t.Fatalf("two creates: %+v", outs)
	}
	ents, _ := os.ReadDir(filepath.Join(home, "envs"))
	n := 0
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d env dirs", n)
	}
}

// TestEnvReadOnlyForOthers: an executor that is not the operator (here
// nobody, through setpriv) can verify and use a sealed env but not change
// it. Debian's python3.11 is used because /root (pyenv's home) is 0700.
func TestEnvReadOnlyForOthers(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	if _, err := os.Stat(debian); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and /usr/bin/python3.11")
	}
	base, err := os.MkdirTemp("", "cruxprov-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testdir.Writable(base); os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	home, lock := envHomeAt(t, home, 2, 10)
	exe := filepath.Join(base, "cruxprov")
	b, _ := os.ReadFile(bin)
	os.WriteFile(exe, b, 0o755)
	r := cruxprov(t, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", debian, "--offline", "--json")
	var out envCreated
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("create: %+v", r)
	}
	sp := filepath.Join(out.Path, "lib", "python3.11", "site-packages")
	nobody := func(args ...string) (string, error) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		o, err := cmd.CombinedOutput()
		return string(o), err
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"verify", []string{exe, "--home", home, "env", "verify", out.Path}},
		{"verify --deep", []string{exe, "--home", home, "env", "verify", out.Path, "--deep"}},
		{"import a module", []string{filepath.Join(out.Path, "bin", "python"), "-c", "import pkga; pkga.main()"}},
		{"run a console script", []string{filepath.Join(out.Path, "bin", "pkgb-cli")}},
	} {
		t.Run("can "+c.name, func(t *testing.T) {
			if o, err := nobody(c.args...); err != nil {
				t.Errorf("as nobody %v: %v\n%s", c.args, err, o)
			}
		})
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"append to a module", []string{filepath.Join(out.Path, "bin", "python"), "-c", "open(" + fmt.Sprintf("%q", sp+"/pkga/__init__.py") + ", 'a')"}},
		{"add a .pth", []string{"touch", sp + "/evil.pth"}},
		{"make a __pycache__", []string{"mkdir", sp + "/pkga/__pycache__"}},
		{"remove a script", []string{"rm", "-f", filepath.Join(out.Path, "bin", "pkga-cli")}},
	} {
		t.Run("cannot "+c.name, func(t *testing.T) {
			if o, err := nobody(c.args...); err == nil {
				t.Errorf("as nobody %v succeeded on a sealed env:\n%s", c.args, o)
			}
		})
	}
	if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
		t.Fatalf("after the attempts: %+v", r)
	}
}

// TestEnvCreateSIGINT: an interrupted create stops, removes its own
// staging directory, and leaves either a sealed env or nothing.
func TestEnvCreateSIGINT(t *testing.T) {
	home, lock := envHome(t, 3, 250)
	args := createArgs(home, lock, "--no-compile")
	ref := createJSON(t, args...)
	clear := func() {
		testdir.Writable(filepath.Join(home, "envs"))
		for _, p := range []string{ref.Path, seal.SealPath(ref.Path), seal.StatIndexPath(ref.Path)} {
			os.RemoveAll(p)
		}
	}
	clear()
	t0 := time.Now()
	createJSON(t, args...)
	took := time.Since(t0)
	clear()
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(2, seed))
	for i := 0; i < 10; i++ {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(took))))
		cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		tmp, _ := os.ReadDir(filepath.Join(home, "tmp"))
		if len(tmp) != 0 {
			t.Fatalf("trial %d (%v): staging left after SIGINT: %v", i, err, tmp)
		}
		_, serr := os.Stat(seal.SealPath(ref.Path))
		_, derr := os.Stat(ref.Path)
		if (serr == nil) != (derr == nil) {
			t.Fatalf("trial %d (%v): seal %v, env dir %v", i, err, serr, derr)
		}
		if serr == nil {
			if _, err := seal.Verify(context.Background(), ref.Path, seal.Options{Deep: true}); err != nil {
				t.Fatal(err)
			}
		}
		clear()
	}
}

// TestEnvCreateFixtureProviders runs the whole flow on the fixture
// providers: a static index built by index.Build served over loopback,
// env create --wheel (resolve the embedded lock for the host, fetch,
// materialize with bytecode, seal), then the provider's script runs.
func TestEnvCreateFixtureProviders(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	home := testdir.New(t)
	for _, p := range fx.Providers() {
		out := createJSON(t, "--home", home, "env", "create", "--wheel", p.Path, "--platform", "host", "--python", envPython, "--index", idx, "--json")
		if out.Reused || out.Packages < 2 { // the root and the runtime at least (acme-native: one lib of its five)
			t.Errorf("%s: %+v", p.Name, out)
		}
		py := filepath.Join(out.Path, "bin", "python")
		mod := strings.ReplaceAll(p.Name, "-", "_")
		if b, err := exec.Command(py, "-c", "import "+mod+", cruxible_provider_runtime").CombinedOutput(); err != nil {
			t.Errorf("%s: import: %v\n%s", p.Name, err, b)
		}
		if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
			t.Errorf("%s: verify: %+v", p.Name, r)
		}
	}
	scripts := filepath.Join(home, "envs")
	hello, _ := filepath.Glob(filepath.Join(scripts, "*", "bin", "acme-hello"))
	if len(hello) != 1 {
		t.Fatalf("acme-hello: %v", hello)
	}
	if b, err := exec.Command(hello[0]).CombinedOutput(); err != nil {
		t.Errorf("acme-hello: %v\n%s", err, b)
	}
	r := cruxprov(t, "--home", home, "env", "list")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1+len(fx.Providers()) || !strings.HasPrefix(r.stdout, "ENV  ") {
		t.Errorf("list: %+v", r)
	}
}

// TestEnvCreateSIGINTExitsInterrupted: SIGINT while the interpreter is
// probed and while wheels are installed ends env create as an
// interruption (exit 1, "error: interrupted …"), never a refusal that
// blames --python or says materialize_failed.
func TestEnvCreateSIGINTExitsInterrupted(t *testing.T) {
	home, lock := envHome(t, 3, 400)
	// The slow interpreter says when it runs: a fixed wait was too short
	// for a loaded machine, where the signal came before cruxprov had
	// installed its handler (and killed it, exit -1).
	sd := t.TempDir()
	slow, probing := filepath.Join(sd, "python"), filepath.Join(sd, "probing")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\n: >"+probing+"\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	probeArgs := []string{"--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", slow, "--offline"}
	for name, tc := range map[string]struct {
		args  []string
		ready string // a file whose existence says the stage is reached
	}{
		"probe":   {probeArgs, probing},
		"install": {createArgs(home, lock), ""},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pr, pw, _ := os.Pipe()
			cmd.Stdout = pw
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			defer pr.Close()
			if tc.ready != "" {
				for i := 0; i < 2000; i++ {
					if _, err := os.Stat(tc.ready); err == nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			} else {
				// Wait until the store has a staging directory (the
				// install has begun), bounded.
				for i := 0; i < 500; i++ {
					if ents, _ := os.ReadDir(filepath.Join(home, "tmp")); len(ents) > 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if code == 0 {
				t.Skip("the create finished before the signal")
			}
			if code != 1 || strings.Contains(stderr.String(), "refused:") || !strings.Contains(stderr.String(), "error: interrupted") {
				t.Errorf("exit %d, stderr %q; want exit 1 and error: interrupted", code, stderr.String())
			}
			if tmp, _ := os.ReadDir(filepath.Join(home, "tmp")); len(tmp) != 0 {
				t.Errorf("staging left: %v", tmp)
			}
		})
	}
}

// TestEnvCreateAsNonOwner: a user who cannot write the store (an
// executor, DESIGN §14) running env create is refused materialize_failed
// with a detail saying the store is not writable by it and to run as the
// store's owner; it said only "cannot open the env lock …: permission
// denied".
func TestEnvCreateAsNonOwner(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-nonowner-", debian)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	home, tlock := envHomeAt(t, home, 1, 2)
	lock := filepath.Join(base, "pylock.toml")
	lb, _ := os.ReadFile(tlock)
	os.WriteFile(lock, lb, 0o644)
	os.MkdirAll(filepath.Join(home, "envs"), 0o755)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		exe, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", debian, "--offline", "--no-compile")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	var se bytes.Buffer
	cmd.Stderr = &se
	cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code != exitRefused || !strings.Contains(se.String(), "refused: "+string(refusal.MaterializeFailed)) ||
		!strings.Contains(se.String(), "not writable by this user") || !strings.Contains(se.String(), "owner") {
		t.Errorf("exit %d, stderr %q", code, se.String())
	}

	// Once the owner has created it, the same command by the non-owner
	// reuses the sealed env (verified), without needing to write anything.
	args := []string{"--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", debian, "--offline", "--no-compile", "--json"}
	owner := exec.Command(exe, args...)
	if out, err := owner.CombinedOutput(); err != nil {
		t.Fatalf("create as the owner: %v\n%s", err, out)
	}
	cmd = exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	se.Reset()
	cmd.Stderr = &se
	out, err := cmd.Output()
	var res struct {
		Reused bool
		Path   string
	}
	if err != nil || json.Unmarshal(out, &res) != nil || !res.Reused {
		t.Errorf("non-owner create of a sealed env: %v, stdout %q, stderr %q", err, out, se.String())
	}

	// Removing it fails with the advice for a removal (it said to
	// "create the env as the store's owner"), exit 1 as gc --envs's
	// removal of it does (it was refused materialize_failed, exit 78).
	cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home, "env", "remove", res.Path)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	se.Reset()
	cmd.Stderr = &se
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitFailure || strings.Contains(se.String(), "refused:") || strings.Contains(se.String(), "store of your own") || !strings.Contains(se.String(), "not writable by this user; remove the env as the store's owner") {
		t.Errorf("non-owner env remove: exit %d, stderr %q", code, se.String())
	}
	if _, err := os.Stat(res.Path); err != nil {
		t.Errorf("the env is gone: %v", err)
	}
}

// TestEnvVerifyUnreadableInterpreter: verify run by a user who cannot
// read the interpreter (nobody, against a copy in a root-only directory)
// says it cannot read it and to verify as a user who can; it said the
// interpreter was "removed (… now permission denied)".
func TestEnvVerifyUnreadableInterpreter(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-unreadable-", debian)
	py := filepath.Join(base, "py")
	os.Mkdir(py, 0o755)
	b, _ := os.ReadFile(debian)
	python := filepath.Join(py, "python3.11")
	if err := os.WriteFile(python, b, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	home, lock := envHomeAt(t, home, 1, 2)
	r := cruxprov(t, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", python, "--offline", "--no-compile", "--json")
	var out envCreated
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("create: %+v", r)
	}
	// A root-only directory (lstat fails) and a root-only file (lstat
	// works, the read fails).
	for _, locked := range []string{py, python} {
		if err := os.Chmod(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		verifyAsNobody(t, exe, home, out.Path)
		os.Chmod(locked, 0o755)
	}
	// Readable again, the env verifies: nothing changed.
	if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
		t.Errorf("verify after restoring access: %+v", r)
	}
}

// nobodyBase skips unless the test can run commands as uid 65534 (root
// and setpriv) and python exists (unless it is ""), and returns a fresh
// world-readable directory (outside root-only temp dirs) holding a copy
// of the binary.
func nobodyBase(t *testing.T, prefix, python string) (base, exe string) {
	t.Helper()
	asuser.Require(t, "run as uid 65534")
	if python != "" {
		if _, err := os.Stat(python); err != nil {
			t.Skipf("needs %s", python)
		}
	}
	base = asuser.Dir(t, prefix)
	t.Cleanup(func() { testdir.Writable(base) }) // before Dir's removal
	return base, asuser.Copy(t, base, bin)
}

// modesReader returns a directory and a runner of the binary as a user
// the file modes bind: as root, uid 65534 (skipping unless it can), with
// a copy of the binary in a fresh world-readable directory; as another
// user, that user in a temporary directory. Root reads whatever the modes,
// so a test of a file this user may not read runs its commands so. Each
// runs with PATH and a HOME that does not exist.
func modesReader(t *testing.T, prefix string) (base string, run func(args ...string) result) {
	t.Helper()
	exe := bin
	if os.Geteuid() == 0 {
		asuser.Require(t, "read as an unprivileged user (root reads whatever the modes)")
		base = asuser.Dir(t, prefix)
		exe = asuser.Copy(t, base, bin)
	} else {
		base = t.TempDir()
	}
	t.Cleanup(func() { testdir.Writable(base) })
	return base, func(args ...string) result {
		cmd := exec.Command(exe, args...)
		if os.Geteuid() == 0 {
			cmd = asuser.Command(65534, 65534, exe, args...)
		}
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		return runCmd(t, cmd)
	}
}

// verifyAsNobody runs env verify (fast and deep) as nobody and expects
// the unreadable-interpreter refusal.
func verifyAsNobody(t *testing.T, exe, home, env string) {
	t.Helper()
	for _, deep := range []bool{false, true} {
		args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home, "env", "verify", env}
		if deep {
			args = append(args, "--deep")
		}
		cmd := exec.Command("setpriv", args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		var se bytes.Buffer
		cmd.Stderr = &se
		cmd.Run()
		code := cmd.ProcessState.ExitCode()
		msg := se.String()
		if code != exitRefused || !strings.Contains(msg, "refused: "+string(refusal.InterpreterUnverifiable)) ||
			strings.Contains(msg, "removed") || !strings.Contains(msg, "cannot read it: permission denied") ||
			!strings.Contains(msg, "as a user who can read the interpreter") {
			t.Errorf("deep=%v: exit %d, stderr %q", deep, code, msg)
		}
	}
}

// crashSeed is the random seed of a crash test: CRUXPROV_CRASH_SEED when
// set (to replay a failure), else the clock; it is logged either way.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CRUXPROV_CRASH_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatalf("CRUXPROV_CRASH_SEED=%q: %v", v, err)
		}
	}
	t.Logf("random seed %d (replay with CRUXPROV_CRASH_SEED=%d)", seed, seed)
	return seed
}

// TestEnvReplaceOfAnotherStore: env create --replace ENV rebuilds ENV in
// the store it runs on. An ENV of another store (the env_drift advice
// followed without its --home) is refused, naming the store to give; it
// was rebuilt into this store instead, "replaced", exit 0, and the env
// named stayed drifted.
func TestEnvReplaceOfAnotherStore(t *testing.T) {
	home, lock := envHome(t, 1, 3)
	out := createJSON(t, createArgs(home, lock, "--no-compile")...)
	other := t.TempDir()
	r := cruxprov(t, "--home", other, "env", "create", "--replace", out.Path, "--offline")
	if r.code != exitUsage || !strings.Contains(r.stderr, out.Path+" is not an env of the store "+other+": give its store: --home "+home) {
		t.Fatalf("--replace of another store's env: %+v", r)
	}
	if ents, _ := os.ReadDir(filepath.Join(other, "envs")); len(ents) > 0 {
		t.Errorf("the refused replace left %v in the other store", ents)
	}
	// env remove says the same, as a usage error (it was materialize_failed).
	if r := cruxprov(t, "--home", other, "env", "remove", out.Path); r.code != exitUsage || !strings.Contains(r.stderr, "give its store: --home "+home) {
		t.Errorf("env remove of another store's env: %+v", r)
	}
	// Through a link to the env, in its own store: rebuilt.
	link := filepath.Join(t.TempDir(), "current")
	os.Symlink(out.Path, link)
	if r := cruxprov(t, "--home", home, "env", "create", "--replace", link, "--offline"); r.code != 0 {
		t.Fatalf("--replace through a link: %+v", r)
	}
}

// echoIndex serves on loopback, for the test, an index that
// cruxprov index build made of the fixtures' wheels: the fixtures and
// the index's URL (…/simple/).
func echoIndex(t *testing.T) (*fixtures.Set, string) {
	t.Helper()
	fx := fixtures.ForTest(t, fixtures.Options{})
	idx := t.TempDir()
	if r := cruxprov(t, "index", "build", idx, "--from", filepath.Dir(fx.Echo.Path), "--quiet"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
	t.Cleanup(srv.Close)
	return fx, srv.URL + "/simple/"
}

package materialize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

// demoWheel exercises every install rule: packages, an executable member,
// every .data scheme, a #!python script, console and gui entry points.
var demoWheel = files{
	"demo/__init__.py":                         "VALUE = 42\n",
	"demo/cli.py":                              "def main():\n    print('demo-cli ok')\n    return 0\n",
	"demo/tool.sh*":                            "#!/bin/sh\necho tool\n",
	"demo-1.0.data/scripts/demo-raw*":          "#!python\nprint('raw script ok')\n",
	"demo-1.0.data/scripts/demo-sh*":           "#!/bin/sh\necho sh\n",
	"demo-1.0.data/data/share/demo/readme.txt": "data\n",
	"demo-1.0.data/headers/demo.h":             "#define DEMO 1\n",
	"demo-1.0.data/purelib/demo_pure.py":       "X = 1\n",
	"demo-1.0.data/platlib/demo_plat.py":       "Y = 2\n",
	"demo-1.0.dist-info/entry_points.txt":      "[console_scripts]\ndemo-cli = demo.cli:main\n[gui_scripts]\ndemo-gui = demo.cli:main\n",
	"demo-1.0.dist-info/top_level.txt":         "demo\n",
}

func TestCreateInstallsEveryScheme(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.NoCompile = false
	res, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	env := res.Dir
	if filepath.Base(env) != res.Digest.Hex() || filepath.Dir(env) != filepath.Join(st.Home(), "envs") {
		t.Fatalf("env at %s, digest %s", env, res.Digest)
	}
	sp := filepath.Join(env, "lib", "python3.11", "site-packages")
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{sp + "/demo/__init__.py", 0o444},
		{sp + "/demo/tool.sh", 0o555},
		{sp + "/demo_pure.py", 0o444},
		{sp + "/demo_plat.py", 0o444},
		{env + "/bin/demo-raw", 0o555},
		{env + "/bin/demo-sh", 0o555},
		{env + "/bin/demo-cli", 0o555},
		{env + "/bin/demo-gui", 0o555},
		{env + "/share/demo/readme.txt", 0o444},
		{env + "/include/site/python3.11/demo/demo.h", 0o444},
		{sp + "/demo-1.0.dist-info/INSTALLER", 0o444},
		{sp + "/demo-1.0.dist-info/RECORD", 0o444},
		{env + "/pyvenv.cfg", 0o444},
		{sp, 0o555},
		{env, 0o555},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode().Perm() != c.mode {
			t.Errorf("%s: mode %o, want %o", c.path, fi.Mode().Perm(), c.mode)
		}
	}
	raw, _ := os.ReadFile(env + "/bin/demo-raw")
	if !strings.HasPrefix(string(raw), "#!"+env+"/bin/python\n") {
		t.Errorf("shebang not rewritten: %q", raw)
	}
	inst, _ := os.ReadFile(sp + "/demo-1.0.dist-info/INSTALLER")
	if string(inst) != "cruxprov\n" {
		t.Errorf("INSTALLER %q", inst)
	}
	if out := runPython(t, env, "-c", "import demo, demo_pure, demo_plat; print(demo.VALUE)"); out != "42\n" {
		t.Errorf("import: %q", out)
	}
	if _, err := os.Stat(sp + "/demo/__pycache__/__init__.cpython-311.pyc"); err != nil {
		t.Errorf("no bytecode: %v", err)
	}
	for _, s := range []string{"demo-cli", "demo-raw"} {
		out, err := execOut(env+"/bin/"+s, env)
		if err != nil || !strings.Contains(out, "ok") {
			t.Errorf("%s: %v %q", s, err, out)
		}
	}
	if _, err := seal.Verify(context.Background(), env, seal.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := seal.Verify(context.Background(), env, seal.Options{Deep: true}); err != nil {
		t.Fatal(err)
	}
	checkStats(t, env)
	// A second create finds it sealed.
	again, err := Create(context.Background(), st, req)
	if err != nil || !again.Reused || again.TreeDigest != res.TreeDigest {
		t.Fatalf("second create: %+v %v", again, err)
	}
}

func TestCreateConflicts(t *testing.T) {
	st := newStore(t)
	a := putWheel(t, st, "a-1.0-py3-none-any.whl", wheeltest.Build(t, "a-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/clash.py": "A\n"}))
	b := putWheel(t, st, "b-1.0-py3-none-any.whl", wheeltest.Build(t, "b-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/clash.py": "B\n"}))
	c := putWheel(t, st, "c-1.0-py3-none-any.whl", wheeltest.Build(t, "c-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/c.py": "C\n"}))
	d := putWheel(t, st, "d-1.0-py3-none-any.whl", wheeltest.Build(t, "d-1.0-py3-none-any.whl", files{"d-1.0.data/data/pyvenv.cfg": "home = /evil\n"}))
	if _, err := Create(context.Background(), st, request(t, a, b)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("a+b: %v", err)
	}
	if _, err := Create(context.Background(), st, request(t, c, d)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("c+d: %v", err)
	}
	// A directory of one wheel that is a file of another, below a directory
	// both write files in (its descriptor is where the mkdir starts).
	e := putWheel(t, st, "e-1.0-py3-none-any.whl", wheeltest.Build(t, "e-1.0-py3-none-any.whl", files{"ns/e.py": "E\n", "ns/deep/sub": "a file\n"}))
	f := putWheel(t, st, "f-1.0-py3-none-any.whl", wheeltest.Build(t, "f-1.0-py3-none-any.whl", files{"ns/f.py": "F\n", "ns/deep/sub/x/y.py": "Y\n"}))
	if _, err := Create(context.Background(), st, request(t, e, f)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("e+f: %v", err)
	}
	res, err := Create(context.Background(), st, request(t, a, c))
	if err != nil {
		t.Fatalf("identical bytes from two wheels must install: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(st.Home(), "envs"))
	var names []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".lock") { // per-digest lock files stay, harmlessly
			names = append(names, e.Name())
		}
	}
	if len(names) != 3 { // the env, its seal, its index
		t.Errorf("envs/ holds %v after two refused creates and one good one (%s)", names, res.Dir)
	}
	tmp, _ := os.ReadDir(filepath.Join(st.Home(), "tmp"))
	if len(tmp) != 0 {
		t.Errorf("staging debris left: %v", tmp)
	}
}

// TestCreateRecoversFromCrashDebris lays out what a crash at each point
// leaves (an unsealed env dir with or without its index; a read-only
// staging dir nobody holds) and checks that verify refuses it and the next
// Create replaces it.
func TestCreateRecoversFromCrashDebris(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	ctx := context.Background()
	ref, err := Create(ctx, st, request(t, w))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		drop []string
	}{
		{"killed after the rename, before the seal", []string{seal.SealPath(ref.Dir)}},
		{"killed after the index, before the rename", []string{seal.SealPath(ref.Dir), ref.Dir}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Create(ctx, st, request(t, w)); err != nil {
				t.Fatal(err)
			}
			for _, p := range c.drop {
				if err := removeTree(p); err != nil {
					t.Fatal(err)
				}
			}
			// a staging dir whose owner died, sealed read-only already
			junk := filepath.Join(st.Home(), "tmp", "env-dead-123")
			os.MkdirAll(junk+"/env/lib", 0o755)
			os.WriteFile(junk+"/env/lib/x.py", nil, 0o444)
			os.Chmod(junk+"/env/lib", 0o555)
			os.Chmod(junk+"/env", 0o555)
			if _, err := seal.Verify(ctx, ref.Dir, seal.Options{}); err == nil {
				t.Fatal("verify accepted a crashed env")
			}
			res, err := Create(ctx, st, request(t, w))
			if err != nil || res.Reused || res.TreeDigest != ref.TreeDigest {
				t.Fatalf("recreate: %+v %v", res, err)
			}
			if _, err := os.Stat(junk); !os.IsNotExist(err) {
				t.Errorf("staging debris not removed: %v", err)
			}
			if _, err := seal.Verify(ctx, ref.Dir, seal.Options{Deep: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRemoveInterrupted: Remove with its context cancelled removes
// nothing (found by SIGINT to gc --envs, which went on removing every env,
// ~0.7 s each, before it stopped), and then removes the env once asked
// again with a live context.
func TestRemoveInterrupted(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	res, err := Create(context.Background(), st, request(t, w))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Remove(ctx, st, res.Dir)
	if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
		t.Fatalf("Remove with a cancelled context: %v (code %q)", err, refusal.CodeOf(err))
	}
	if _, err := seal.Verify(context.Background(), res.Dir, seal.Options{Deep: true}); err != nil {
		t.Fatalf("the env was touched: %v", err)
	}
	if err := Remove(context.Background(), st, res.Dir); err != nil {
		t.Fatal(err)
	}
	// Nothing of it is left, its lock included (one per env removed
	// piled up in envs/).
	ents, _ := os.ReadDir(filepath.Join(st.Home(), EnvsDir))
	for _, e := range ents {
		if strings.Contains(e.Name(), filepath.Base(res.Dir)) {
			t.Errorf("left in envs/: %s", e.Name())
		}
	}
}

// TestLockFileRemovedWhileWaiting: a create waiting on an env's lock that
// a removal unlinks as it lets go (unlockAndRemove) locks the file the
// path names then, not the unlinked one: otherwise a third process,
// making the lock anew, would hold it too, and two writers would share
// the env.
func TestLockFileRemovedWhileWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".env.lock")
	ctx := context.Background()
	unlock, err := lockFile(ctx, path, "remove")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func())
	go func() {
		u, err := lockFile(ctx, path, "create")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	time.Sleep(50 * time.Millisecond) // the second is waiting on the first's file
	unlockAndRemove(path, unlock)
	second := <-got
	defer second()
	// A third locker must not get the lock while the second holds it.
	third, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the second holds no lock file at the path: %v", err)
	}
	defer third.Close()
	if err := unix.Flock(int(third.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("a third process could lock the env the second holds: %v", err)
	}
}

// TestCreateIsReproducible: the same inputs in the same store give the same
// tree digest, bytecode included (unchecked-hash pycs, PYTHONHASHSEED=0).
func TestCreateIsReproducible(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.NoCompile = false
	ctx := context.Background()
	a, err := Create(ctx, st, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{seal.SealPath(a.Dir), seal.StatIndexPath(a.Dir), a.Dir} {
		if err := removeTree(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Create(ctx, st, req)
	if err != nil {
		t.Fatal(err)
	}
	if b.Reused || a.TreeDigest != b.TreeDigest {
		t.Fatalf("tree digests %s and %s", a.TreeDigest, b.TreeDigest)
	}
}

// TestCreateTreeDigestDependsOnHome holds what docs/seal.md says: the
// same request in two stores has one materialization digest (the identity
// across homes) but two tree digests (the env's absolute path is in
// pyvenv.cfg, script shebangs and bytecode co_filename).
func TestCreateTreeDigestDependsOnHome(t *testing.T) {
	var got []*Result
	for range 2 {
		st := newStore(t)
		w := putDemo(t, st)
		req := request(t, w)
		req.NoCompile = false
		r, err := Create(context.Background(), st, req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if got[0].Digest != got[1].Digest {
		t.Errorf("materialization digests differ across homes: %s, %s", got[0].Digest, got[1].Digest)
	}
	if got[0].TreeDigest == got[1].TreeDigest {
		t.Errorf("tree digests equal across homes (%s): docs/seal.md says they depend on the home", got[0].TreeDigest)
	}
}

// TestCreateInterruptedIsNotARefusal: a create cancelled while it
// installs returns an error wrapping context.Canceled with no refusal
// code (it is not materialize_failed), and leaves no staging.
func TestCreateInterruptedIsNotARefusal(t *testing.T) {
	st := newStore(t)
	good := putDemo(t, st)
	for _, stage := range []string{"install", "wheel", "compile", "seal"} {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := request(t, good)
			req.NoCompile = stage != "compile"
			req.Events = func(e Event) {
				if e.Stage == stage {
					cancel()
				}
			}
			_, err := Create(ctx, st, req)
			if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
				t.Fatalf("cancelled at %s: %v (code %q)", stage, err, refusal.CodeOf(err))
			}
			if ents, _ := os.ReadDir(filepath.Join(st.Home(), "tmp")); len(ents) != 0 {
				t.Errorf("staging left: %v", ents)
			}
		})
	}
}

func TestCreateRefusals(t *testing.T) {
	st := newStore(t)
	good := putDemo(t, st)
	ctx := context.Background()
	missing := good
	missing.SHA256 = digestOf("not stored")
	if _, err := Create(ctx, st, request(t, missing)); !errors.Is(err, refusal.MaterializeFailed) {
		t.Errorf("wheel not in the store: %v", err)
	}
	// A platform for another Python version is interpreter_mismatch.
	req := request(t, good)
	other := *req.Platform
	other.PythonVersion = "3.12"
	other.Markers = map[string]string{}
	for k, v := range req.Platform.Markers {
		other.Markers[k] = v
	}
	other.Markers["python_version"] = "3.12"
	req.Platform = &other
	if _, err := Create(ctx, st, req); !errors.Is(err, refusal.InterpreterMismatch) {
		t.Errorf("3.12 platform on a 3.11 interpreter: %v", err)
	} else if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNamePython {
		t.Errorf("3.12 platform on a 3.11 interpreter: remedy %+v, want %s (an interpreter that matches)", r, refusal.ActionNamePython)
	}
	// An interpreter that does not run: the same remedy.
	bad := request(t, good)
	bad.Interpreter, bad.Python = nil, "/nonexistent/python3"
	if _, err := Create(ctx, st, bad); refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionNamePython {
		t.Errorf("an interpreter not there: %v: remedy %+v, want %s", err, refusal.RemedyOf(err), refusal.ActionNamePython)
	}
	// Cancelled before anything: nothing is left.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Create(cctx, st, request(t, good)); err == nil {
		t.Error("a cancelled create succeeded")
	}
	ents, _ := os.ReadDir(filepath.Join(st.Home(), "tmp"))
	if len(ents) != 0 {
		t.Errorf("debris after cancel: %v", ents)
	}
}

// TestCreateRefusesTamperedMember: a member whose bytes differ from RECORD
// (the zip's own CRC and the wheel's hash are made to match the tampered
// archive) is record_mismatch, naming the wheel (it named the member
// alone, not which of the env's wheels it was in), and nothing is left
// behind.
func TestCreateRefusesTamperedMember(t *testing.T) {
	st := newStore(t)
	b := wheeltest.Build(t, "demo-1.0-py3-none-any.whl", demoWheel)
	i := bytes.Index(b, []byte("VALUE = 42"))
	if i < 0 {
		t.Fatal("member not found stored in the wheel")
	}
	b = bytes.Clone(b)
	b[i+9] = '3'
	w := putWheel(t, st, "demo-1.0-py3-none-any.whl", b)
	_, err := Create(context.Background(), st, request(t, w))
	if !errors.Is(err, refusal.RecordMismatch) && !errors.Is(err, refusal.WheelInvalid) {
		t.Fatalf("tampered member: %v", err)
	}
	if !strings.Contains(err.Error(), "demo-1.0-py3-none-any.whl: ") {
		t.Errorf("%v does not name the wheel", err)
	}
	for _, d := range []string{"envs", "tmp"} {
		ents, _ := os.ReadDir(filepath.Join(st.Home(), d))
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s/%s left after a refused create", d, e.Name())
			}
		}
	}
}

// TestBytecodeIsUncheckedHashWithFinalPaths: the pycs are hash-based and
// unchecked (PEP 552 flags 0b01), and name the final env path, not the
// staging directory they were compiled in.
func TestBytecodeIsUncheckedHashWithFinalPaths(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.NoCompile = false
	res, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	out := runPython(t, res.Dir, "-c", `
import marshal, sys
p = sys.argv[1]
b = open(p, "rb").read()
flags = int.from_bytes(b[4:8], "little")
code = marshal.loads(b[16:])
print(flags, code.co_filename)
`, filepath.Join(res.Dir, "lib/python3.11/site-packages/demo/__pycache__/cli.cpython-311.pyc"))
	want := fmt.Sprintf("1 %s/lib/python3.11/site-packages/demo/cli.py\n", res.Dir)
	if out != want {
		t.Fatalf("pyc: %q, want %q", out, want)
	}
}

// TestCreateChecksFreeDisk puts the store on a small tmpfs: a resolution
// that unpacks to more than the free space is refused before anything is
// written (§14).
func TestCreateChecksFreeDisk(t *testing.T) {
	dir := testdir.Tmpfs(t, "6m")
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	big := files{"big/__init__.py": "", "big/blob.bin": strings.Repeat("0123456789abcdef", 220<<10)} // 3.4 MiB, stored
	w := putWheel(t, st, "big-1.0-py3-none-any.whl", wheeltest.Build(t, "big-1.0-py3-none-any.whl", big))
	_, err = Create(context.Background(), st, request(t, w))
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "free but the env needs about") {
		t.Fatalf("want a free-space refusal, got %v", err)
	}
	for _, d := range []string{"envs", "tmp"} {
		ents, _ := os.ReadDir(filepath.Join(st.Home(), d))
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s/%s left behind", d, e.Name())
			}
		}
	}
}

// TestOneScriptNameTwoObjects: a wheel naming one script in
// [console_scripts] and in [gui_scripts] with different objects is
// wheel_invalid and says which two; it was install_conflict naming the
// same wheel as both writers of bin/NAME. The same object in both groups
// installs (the two scripts are the same bytes).
func TestOneScriptNameTwoObjects(t *testing.T) {
	host(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		eps  string
		code refusal.Code
	}{
		{"two objects", "[console_scripts]\nx = a:main\n[gui_scripts]\nx = b:main\n", refusal.WheelInvalid},
		{"one object", "[console_scripts]\nx = a:main\n[gui_scripts]\nx = a:main [gui]\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			b := wheeltest.Build(t, "ep-1.0-py3-none-any.whl", files{"a.py": "def main(): pass\n", "b.py": "def main(): pass\n", "DI/entry_points.txt": c.eps})
			_, err := Create(ctx, st, request(t, putWheel(t, st, "ep-1.0-py3-none-any.whl", b)))
			if refusal.CodeOf(err) != c.code {
				t.Errorf("%q: %v, want %q", c.eps, err, c.code)
			} else if c.code != "" && !strings.Contains(err.Error(), "a:main") || c.code != "" && !strings.Contains(err.Error(), "b:main") {
				t.Errorf("%q: %v does not name both objects", c.eps, err)
			}
		})
	}
}

// TestWheelWritesOnePathTwice: two members of one wheel that install on
// one path with different bytes (a root module and a .data/purelib one, a
// data file in bin/ and an entry point script) are wheel_invalid naming
// the wheel once; they were install_conflict saying the wheel and itself
// both write it, whose remedy (fix the lock) does not apply.
func TestWheelWritesOnePathTwice(t *testing.T) {
	host(t)
	for _, fs := range []files{
		{"a.py": "A = 1\n", "ep-1.0.data/purelib/a.py": "A = 2\n"},
		{"a.py": "def main(): pass\n", "ep-1.0.data/data/bin/x*": "#!/bin/sh\n", "DI/entry_points.txt": "[console_scripts]\nx = a:main\n"},
	} {
		st := newStore(t)
		b := wheeltest.Build(t, "ep-1.0-py3-none-any.whl", fs)
		_, err := Create(context.Background(), st, request(t, putWheel(t, st, "ep-1.0-py3-none-any.whl", b)))
		if refusal.CodeOf(err) != refusal.WheelInvalid || strings.Count(err.Error(), "ep-1.0-py3-none-any.whl") != 1 {
			t.Errorf("%v: %v, want wheel_invalid naming the wheel once", fs, err)
		}
	}
}

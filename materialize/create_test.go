package materialize

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/materialize/seal"
	"github.com/cruxible/cruxprov/refusal"
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
	w := putWheel(t, st, "demo-1.0-py3-none-any.whl", buildWheel(t, "demo-1.0-py3-none-any.whl", demoWheel))
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
	// A second create finds it sealed.
	again, err := Create(context.Background(), st, req)
	if err != nil || !again.Reused || again.TreeDigest != res.TreeDigest {
		t.Fatalf("second create: %+v %v", again, err)
	}
}

func TestCreateConflicts(t *testing.T) {
	st := newStore(t)
	a := putWheel(t, st, "a-1.0-py3-none-any.whl", buildWheel(t, "a-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/clash.py": "A\n"}))
	b := putWheel(t, st, "b-1.0-py3-none-any.whl", buildWheel(t, "b-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/clash.py": "B\n"}))
	c := putWheel(t, st, "c-1.0-py3-none-any.whl", buildWheel(t, "c-1.0-py3-none-any.whl", files{"ns/shared.py": "same\n", "ns/c.py": "C\n"}))
	d := putWheel(t, st, "d-1.0-py3-none-any.whl", buildWheel(t, "d-1.0-py3-none-any.whl", files{"d-1.0.data/data/pyvenv.cfg": "home = /evil\n"}))
	if _, err := Create(context.Background(), st, request(t, a, b)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("a+b: %v", err)
	}
	if _, err := Create(context.Background(), st, request(t, c, d)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("c+d: %v", err)
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

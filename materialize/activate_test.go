package materialize

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// activateInterpreters are the interpreters here whose venv forms differ:
// 3.9–3.12 write the prompt as "(NAME) ", 3.13 as "NAME" (and moved
// activate.fish to common/), Debian's 3.11.2 quotes every value
// (gh-124651 backported).
var activateInterpreters = []struct{ name, python string }{
	{"3.9", "/root/.pyenv/versions/3.9.18/bin/python3.9"},
	{"3.10", "/root/.pyenv/versions/3.10.13/bin/python3.10"},
	{"3.11", "/root/.pyenv/versions/3.11.7/bin/python3.11"},
	{"3.12", "/root/.pyenv/versions/3.12.1/bin/python3.12"},
	{"3.13", "/root/.pyenv/versions/3.13.0/bin/python3.13"},
	{"debian-3.11", "/usr/bin/python3.11"},
}

// interpreterFor probes python and its host platform, skipping the test
// when it is not installed here.
func interpreterFor(t *testing.T, python string) (*Probe, *platform.Platform) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s here", python)
	}
	ctx := context.Background()
	in, err := ProbeInterpreter(ctx, python)
	if err != nil {
		t.Fatal(err)
	}
	p, err := platform.Host(ctx, python)
	if err != nil {
		t.Fatal(err)
	}
	return in, p
}

// TestActivateMatchesVenv writes the venv of each interpreter into a
// staging dir for a final path with a space and a quote in it (values
// some venvs quote), and compares every file `python -m venv
// --without-pip` of the same interpreter writes in bin/ at that final
// path: the same names, bytes and permission bits.
func TestActivateMatchesVenv(t *testing.T) {
	for _, tc := range activateInterpreters {
		t.Run(tc.name, func(t *testing.T) {
			in, p := interpreterFor(t, tc.python)
			l, err := LayoutFor(p)
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			final := filepath.Join(root, "it's a store", "env-"+tc.name)
			cmd := exec.Command(tc.python, "-m", "venv", "--without-pip", final)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("python -m venv: %v\n%s", err, out)
			}
			staging := filepath.Join(root, "staging")
			if err := os.Mkdir(staging, 0o755); err != nil {
				t.Fatal(err)
			}
			scripts, err := writeVenv(staging, final, in, l)
			if err != nil {
				t.Fatal(err)
			}
			want := binFiles(t, filepath.Join(final, "bin"))
			got := binFiles(t, filepath.Join(staging, "bin"))
			if len(want) < 4 {
				t.Fatalf("venv wrote only %d scripts: %v", len(want), want)
			}
			if len(scripts) != len(want) {
				t.Errorf("writeVenv reported %v; venv wrote %d scripts", scripts, len(want))
			}
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("bin/%s: venv writes it, cruxprov does not", name)
				case g.mode != w.mode:
					t.Errorf("bin/%s: mode %v, venv %v", name, g.mode, w.mode)
				case g.data != w.data:
					t.Errorf("bin/%s differs:\n--- cruxprov\n%s\n--- venv\n%s", name, g.data, w.data)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("bin/%s: only cruxprov writes it", name)
				}
			}
		})
	}
}

type binFile struct {
	mode fs.FileMode
	data string
}

// binFiles reads the regular files of a bin directory (not the links).
func binFiles(t *testing.T, dir string) map[string]binFile {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]binFile{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = binFile{mode: fi.Mode(), data: string(b)}
	}
	return out
}

// activateScript is run by the real bash: it sources the env's activate,
// asks the env's python for sys.prefix, deactivates, and reports what the
// shell looks like before, during and after.
const activateScript = `PS1='orig$ '
before_path=$PATH
. "$1/bin/activate" || exit 9
echo "prefix=$(python -c 'import sys; print(sys.prefix)')"
echo "which=$(command -v python)"
echo "venv=$VIRTUAL_ENV"
echo "ps1=$PS1"
deactivate || exit 8
echo "after=${VIRTUAL_ENV-unset}"
echo "ps1=$PS1"
[ "$PATH" = "$before_path" ] && echo "path=restored"
type deactivate >/dev/null 2>&1 || echo "deactivate=gone"
`

// TestActivateInBash creates a sealed env with each interpreter and
// sources its bin/activate in the real bash: python is the env's, its
// sys.prefix is the env's final path (not the staging dir it was built
// in), the prompt names the env, and deactivate restores PATH and PS1.
func TestActivateInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	for _, tc := range activateInterpreters {
		t.Run(tc.name, func(t *testing.T) {
			in, p := interpreterFor(t, tc.python)
			st := newStore(t)
			res, err := Create(context.Background(), st, Request{Platform: p, Interpreter: in, Resolution: lockfile.Resolution{Platform: p.ID()}, NoCompile: true})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", activateScript, "bash", res.Dir)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "HOME=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			name := filepath.Base(res.Dir)
			want := []string{
				"prefix=" + res.Dir,
				"which=" + filepath.Join(res.Dir, "bin", "python"),
				"venv=" + res.Dir,
				"ps1=(" + name + ") orig$ ",
				"after=unset",
				"ps1=orig$ ",
				"path=restored",
				"deactivate=gone",
			}
			if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("bash said:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
			}
		})
	}
}

// TestActivateSkipped: an interpreter without the venv package, without
// templates, or with a venv whose substitution is not a known form gets
// no activate scripts and no error; a template that cannot be read is an
// error.
func TestActivateSkipped(t *testing.T) {
	_, hin := host(t)
	l := Layout{Bin: "bin"}
	src, err := os.ReadFile(filepath.Join(hin.VenvDir, "__init__.py"))
	if err != nil {
		t.Fatal(err)
	}
	venvPkg := func(t *testing.T, init string, templates bool) string {
		d := t.TempDir()
		if init != "" {
			if err := os.WriteFile(filepath.Join(d, "__init__.py"), []byte(init), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if templates {
			if err := os.MkdirAll(filepath.Join(d, "scripts", "common"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "scripts", "common", "activate"), []byte("X=__VENV_DIR__\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	// CPython 3.11.7 substitutes with text.replace calls; Debian's 3.11
	// (and CPython from 3.12 on) with a table of replacements.
	changed := string(src)
	for _, form := range [][2]string{
		{"text = text.replace('__VENV_DIR__', context.env_dir)", "text = text.replace('__VENV_DIR__', context.env_dir.upper())"},
		{"'__VENV_DIR__': context.env_dir,", "'__VENV_DIR__': context.env_dir.upper(),"},
	} {
		if changed == string(src) {
			changed = strings.Replace(changed, form[0], form[1], 1)
		}
	}
	if changed == string(src) {
		t.Fatalf("%s/__init__.py is not the plain form this test edits", hin.VenvDir)
	}
	for _, tc := range []struct {
		name    string
		venvDir func(t *testing.T) string
		written int
	}{
		{"no venv package", func(*testing.T) string { return "" }, 0},
		{"venv dir gone", func(t *testing.T) string { return filepath.Join(t.TempDir(), "venv") }, 0},
		{"no __init__.py", func(t *testing.T) string { return venvPkg(t, "", true) }, 0},
		{"no templates", func(t *testing.T) string { return venvPkg(t, string(src), false) }, 0},
		{"unknown substitution", func(t *testing.T) string { return venvPkg(t, changed, true) }, 0},
		{"unknown prompt", func(t *testing.T) string {
			return venvPkg(t, strings.Replace(string(src), "context.prompt = '(%s) ' % prompt", "context.prompt = '[%s] ' % prompt", 1), true)
		}, 0},
		{"known form", func(t *testing.T) string { return venvPkg(t, string(src), true) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := *hin
			in.VenvDir = tc.venvDir(t)
			dir := t.TempDir()
			names, err := writeActivate(dir, "/envs/e", &in, l)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != tc.written {
				t.Fatalf("wrote %v, want %d scripts", names, tc.written)
			}
			if tc.written > 0 {
				b, err := os.ReadFile(filepath.Join(dir, "bin", "activate"))
				if err != nil || string(b) != "X=/envs/e\n" {
					t.Fatalf("bin/activate = %q, %v", b, err)
				}
			}
		})
	}
	t.Run("dangling template", func(t *testing.T) {
		in := *hin
		in.VenvDir = venvPkg(t, string(src), true)
		tpl := filepath.Join(in.VenvDir, "scripts", "common", "activate")
		if err := os.Remove(tpl); err != nil {
			t.Fatal(err)
		}
		// venv opens it and fails (FileNotFoundError); so does writeActivate.
		if err := os.Symlink(filepath.Join(in.VenvDir, "missing"), tpl); err != nil {
			t.Fatal(err)
		}
		_, err := writeActivate(t.TempDir(), "/envs/e", &in, l)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a dangling template link: %v, want not exist", err)
		}
	})
}

// TestShlexQuote pins shlexQuote to Python's shlex.quote on the strings
// that matter (run through the real interpreter).
func TestShlexQuote(t *testing.T) {
	_, in := host(t)
	cases := []string{"", "/plain/path-1.2_x", "it's", "a b", "(env) ", "$HOME", "é", "a\"b", "x;y", "@%+=:,./-"}
	var prog strings.Builder
	prog.WriteString("import shlex, sys\nfor a in sys.argv[1:]:\n    sys.stdout.write(shlex.quote(a) + '\\0')\n")
	out, err := exec.Command(in.Path, append([]string{"-I", "-c", prog.String()}, cases...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i, c := range cases {
		t.Run(fmt.Sprintf("%q", c), func(t *testing.T) {
			if got := shlexQuote(c); got != want[i] {
				t.Errorf("shlexQuote(%q) = %q, Python %q", c, got, want[i])
			}
		})
	}
}

// TestActivateReserved: a wheel that installs a file over an activate
// script is an install conflict, not an overwrite of the venv's own.
func TestActivateReserved(t *testing.T) {
	st := newStore(t)
	w := putWheel(t, st, "shadow-1.0-py3-none-any.whl", wheeltest.Build(t, "shadow-1.0-py3-none-any.whl", files{
		"shadow.py":                        "",
		"shadow-1.0.data/scripts/activate": "echo not the venv's\n",
	}))
	if _, err := Create(context.Background(), st, request(t, w)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("a wheel shipping bin/activate: %v, want install_conflict", err)
	}
}

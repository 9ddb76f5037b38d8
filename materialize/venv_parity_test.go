package materialize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
)

// venvParityCases are the interpreters here whose `python -m venv
// --without-pip` skeletons differ: 3.8 links no bin/python3.8 of its own
// (its binary already has that name), 3.9 and 3.10 write pyvenv.cfg
// without executable/command, 3.11 and 3.12 include/pythonX.Y, 3.13
// .gitignore and another prompt, Debian's 3.11 quotes the activate
// scripts' values. run is what venv is run as (the real binary unless
// said); allowed are the paths where the env differs on purpose, and why.
var venvParityCases = []struct {
	name, python, run string
	allowed           map[string]string
}{
	{name: "3.8", python: "/root/.pyenv/versions/3.8.18/bin/python3.8"},
	{name: "3.9", python: "/root/.pyenv/versions/3.9.18/bin/python3.9"},
	{name: "3.10", python: "/root/.pyenv/versions/3.10.13/bin/python3.10"},
	{name: "3.11", python: "/root/.pyenv/versions/3.11.7/bin/python3.11"},
	{name: "3.12", python: "/root/.pyenv/versions/3.12.1/bin/python3.12"},
	{name: "3.13", python: "/root/.pyenv/versions/3.13.0/bin/python3.13"},
	{name: "debian-3.11", python: "/usr/bin/python3.11"},
	// venv names the interpreter as it was run (bin/python3 -> the
	// link /usr/bin/python3, python and python3.11 -> python3, the link
	// in command =); the env is bound to the binary the probe resolved.
	{name: "debian-3.11-via-link", python: "/usr/bin/python3.11", run: "/usr/bin/python3", allowed: map[string]string{
		"bin/python":     "python3.11 here, python3 from venv: both name the env's link to the interpreter",
		"bin/python3":    "python3.11 here, /usr/bin/python3 (the link it was run as) from venv",
		"bin/python3.11": "/usr/bin/python3.11 (the real binary) here, python3 from venv",
		"pyvenv.cfg":     "command = names /usr/bin/python3.11 here, the link /usr/bin/python3 from venv",
	}},
}

// TestVenvMatchesPython lays out the venv of each interpreter with
// writeVenv into a staging dir for a final path, runs `python -m venv
// --without-pip` of the same interpreter at that final path, and compares
// the whole trees: every path, its type, permission bits, link target and
// bytes (pyvenv.cfg, .gitignore, the activate scripts), both made under
// umask 022. Nothing may differ but a case's allowed paths, which must
// still exist on both sides with the same type.
func TestVenvMatchesPython(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, tc := range venvParityCases {
		t.Run(tc.name, func(t *testing.T) {
			run := tc.run
			if run == "" {
				run = tc.python
			} else if _, err := os.Stat(run); err != nil {
				t.Skipf("no %s here", run)
			}
			in, p := interpreterFor(t, tc.python)
			l, err := LayoutFor(p)
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			final := filepath.Join(root, "it's a store", "env-"+tc.name)
			cmd := exec.Command(run, "-m", "venv", "--without-pip", final)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "HOME=" + root}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("python -m venv: %v\n%s", err, out)
			}
			staging := filepath.Join(root, "staging")
			if err := os.Mkdir(staging, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := writeVenv(staging, final, in, l); err != nil {
				t.Fatal(err)
			}
			want := skeleton(t, final)
			got := skeleton(t, staging)
			if len(want) < 12 {
				t.Fatalf("venv wrote only %d paths: %v", len(want), want)
			}
			for _, rel := range sortedKeys(got, want) {
				g, gok := got[rel]
				w, wok := want[rel]
				switch {
				case !gok:
					t.Errorf("%s: venv writes %s, cruxprov nothing", rel, w)
				case !wok:
					t.Errorf("%s: cruxprov writes %s, venv nothing", rel, g)
				case tc.allowed[rel] != "":
					if g.kind != w.kind {
						t.Errorf("%s: %s here, %s from venv (only its content may differ: %s)", rel, g, w, tc.allowed[rel])
					}
				case g != w:
					t.Errorf("%s differs:\n--- cruxprov\n%s\n--- venv\n%s", rel, g, w)
				}
			}
		})
	}
}

// skelEntry is one path of a venv skeleton.
type skelEntry struct {
	kind byte // d, f, l
	perm fs.FileMode
	data string // a file's bytes or a link's target
}

func (e skelEntry) String() string { return fmt.Sprintf("%c %04o %q", e.kind, e.perm, e.data) }

// skeleton reads every path under root (root itself as ".").
func skeleton(t *testing.T, root string) map[string]skelEntry {
	t.Helper()
	out := map[string]skelEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := skelEntry{perm: fi.Mode().Perm()}
		switch {
		case fi.IsDir():
			e.kind = 'd'
		case fi.Mode()&fs.ModeSymlink != 0:
			e.kind = 'l'
			e.perm = 0 // a link's bits are not its own
			if e.data, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			e.kind = 'f'
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.data = string(b)
		default:
			return fmt.Errorf("%s: unexpected %v", p, fi.Mode())
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedKeys(ms ...map[string]skelEntry) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestVenvShape: the venv/__init__.py of an interpreter decides what its
// venv writes when it is a form CPython shipped (so a distribution's
// backport is followed, whatever the version says); without one, or with
// a form not known here, the version decides.
func TestVenvShape(t *testing.T) {
	read := func(t *testing.T, python string) string {
		t.Helper()
		in, _ := interpreterFor(t, python)
		b, err := os.ReadFile(filepath.Join(in.VenvDir, "__init__.py"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	pkg := func(t *testing.T, src string) string {
		t.Helper()
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "__init__.py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	all := venvShape{command: true, gitignore: true, minorLink: true}
	for _, tc := range []struct {
		name    string
		version string
		venvDir func(t *testing.T) string
		want    venvShape
	}{
		{"3.8 without venv", "3.8.18", nil, venvShape{}},
		{"3.10 without venv", "3.10.16", nil, venvShape{minorLink: true}},
		{"3.12 without venv", "3.12.8", nil, venvShape{command: true, minorLink: true}},
		{"3.13 without venv", "3.13.1", nil, all},
		{"4.0 without venv", "4.0.0", nil, all},
		{"3.13 venv dir gone", "3.13.0", func(t *testing.T) string { return filepath.Join(t.TempDir(), "venv") }, all},
		{"3.8 source", "3.13.0", func(t *testing.T) string { return pkg(t, read(t, "/root/.pyenv/versions/3.8.18/bin/python3.8")) }, venvShape{}},
		{"3.10 source", "3.12.0", func(t *testing.T) string { return pkg(t, read(t, "/root/.pyenv/versions/3.10.13/bin/python3.10")) }, venvShape{minorLink: true}},
		{"3.12 source", "3.9.0", func(t *testing.T) string { return pkg(t, read(t, "/root/.pyenv/versions/3.12.1/bin/python3.12")) }, venvShape{command: true, minorLink: true}},
		{"3.13 source", "3.9.0", func(t *testing.T) string { return pkg(t, read(t, "/root/.pyenv/versions/3.13.0/bin/python3.13")) }, all},
		{"3.13 source, CLI default off", "3.13.0", func(t *testing.T) string {
			return pkg(t, strings.Replace(read(t, "/root/.pyenv/versions/3.13.0/bin/python3.13"), "default=frozenset(['git']),", "default=frozenset(),", 1))
		}, venvShape{command: true, minorLink: true}},
		{"3.13 source, unknown forms", "3.10.0", func(t *testing.T) string {
			src := read(t, "/root/.pyenv/versions/3.13.0/bin/python3.13")
			for _, r := range [][2]string{
				{"args.append(context.env_dir)", "args.append(context.env_dir.upper())"},
				{"file.write('*\\n')", "file.write('**\\n')"},
				{"f'python3.{sys.version_info[1]}'", "f'python3.{sys.version_info.minor}'"},
			} {
				if !strings.Contains(src, r[0]) {
					t.Fatalf("3.13's venv has no %s", r[0])
				}
				src = strings.Replace(src, r[0], r[1], 1)
			}
			return pkg(t, src)
		}, venvShape{minorLink: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Probe{Interpreter: digest.Interpreter{Path: "/opt/py/bin/python3"}, VenvVersion: tc.version}
			if tc.venvDir != nil {
				in.VenvDir = tc.venvDir(t)
			}
			got, err := readVenvShape(in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("shape %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, v := range []string{"", "3.11", "3.11.", "3.x.1", "3.11.7rc1"} {
		if _, err := readVenvShape(&Probe{Interpreter: digest.Interpreter{Path: "/opt/py/bin/python3"}, VenvVersion: v}); err == nil {
			t.Errorf("version %q: no error", v)
		}
	}
}

// TestVenvBinLinks: bin/NAME links to the interpreter under its own base
// name, and python, python3 and python3.Y (3.9+) link to NAME, so an
// interpreter whose binary is not named pythonX.Y (a free-threaded
// python3.13t, a plain python) gets venv's links.
func TestVenvBinLinks(t *testing.T) {
	_, hin := host(t)
	for _, tc := range []struct {
		exe, version string
		want         map[string]string
	}{
		{"python3.13t", "3.13.0", map[string]string{"python3.13t": "/opt/py/bin/python3.13t", "python": "python3.13t", "python3": "python3.13t", "python3.13": "python3.13t"}},
		{"python", "3.11.7", map[string]string{"python": "/opt/py/bin/python", "python3": "python", "python3.11": "python"}},
		{"python3", "3.8.18", map[string]string{"python3": "/opt/py/bin/python3", "python": "python3"}},
	} {
		t.Run(tc.exe, func(t *testing.T) {
			in := *hin
			in.Path, in.VenvVersion, in.VenvDir = "/opt/py/bin/"+tc.exe, tc.version, ""
			dir := t.TempDir()
			if _, err := writeVenv(dir, "/envs/e", &in, Layout{Bin: "bin", Include: "include", SitePackages: "lib/python3.x/site-packages"}); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for rel, e := range skeleton(t, filepath.Join(dir, "bin")) {
				if e.kind == 'l' {
					got[rel] = e.data
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("links %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVenvGitignoreReserved: a 3.13 env has venv's .gitignore, sealed
// like every other file, and a wheel that installs a file over it is an
// install conflict.
func TestVenvGitignoreReserved(t *testing.T) {
	in, p := interpreterFor(t, "/root/.pyenv/versions/3.13.0/bin/python3.13")
	req := func(ws ...lockfile.ResolvedWheel) Request {
		res := lockfile.Resolution{Platform: p.ID(), Packages: ws}
		res.Sort()
		return Request{Platform: p, Interpreter: in, Resolution: res, NoCompile: true}
	}
	st := newStore(t)
	res, err := Create(context.Background(), st, req())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, ".gitignore"))
	if err != nil || !bytes.Equal(b, []byte(venvGitignore)) {
		t.Fatalf(".gitignore = %q, %v", b, err)
	}
	w := putWheel(t, st, "ign-1.0-py3-none-any.whl", wheeltest.Build(t, "ign-1.0-py3-none-any.whl", files{
		"ign.py":                       "",
		"ign-1.0.data/data/.gitignore": "!*\n",
	}))
	if _, err := Create(context.Background(), st, req(w)); !errors.Is(err, refusal.InstallConflict) {
		t.Fatalf("a wheel shipping .gitignore into a 3.13 env: %v, want install_conflict", err)
	}
}

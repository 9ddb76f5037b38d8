package materialize

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cruxible/cruxprov/platform"
)

// Layout is where things go in an env, relative to its root, for one
// platform (POSIX layout; the paths are '/'-separated).
type Layout struct {
	LibDir       string // lib/python3.11
	SitePackages string // lib/python3.11/site-packages
	Bin          string // bin
	Include      string // include/python3.11 (3.11+) or include
	Python       string // bin/python
	PythonXY     string // python3.11, the link to the interpreter
	PythonVer    string // 3.11
}

// LayoutFor returns the env layout of platform p (its LibDir names the
// library directory, lib/pythonX.Y or lib/pythonX.Yt).
func LayoutFor(p *platform.Platform) (Layout, error) {
	lib := p.LibDir
	if lib == "" || path.IsAbs(lib) || path.Clean(lib) != lib || !strings.HasPrefix(lib, "lib/python") {
		return Layout{}, fmt.Errorf("platform %s has library directory %q; only POSIX lib/pythonX.Y layouts are materialized locally", p.ID(), lib)
	}
	base := path.Base(lib) // python3.11
	l := Layout{
		LibDir:       lib,
		SitePackages: lib + "/site-packages",
		Bin:          "bin",
		Include:      "include",
		Python:       "bin/python",
		PythonXY:     base,
		PythonVer:    p.PythonVersion,
	}
	// python -m venv uses the sysconfig "venv" scheme from 3.11 on, which
	// puts headers in include/pythonX.Y; before that it made include/.
	if maj, min := p.Version(); maj > 3 || maj == 3 && min >= 11 {
		l.Include = "include/" + base
	}
	return l, nil
}

// writeVenv lays out a venv at dir (the staging directory) for interpreter
// in, as `python -m venv --without-pip final` would, without running it:
// pyvenv.cfg, bin/pythonX.Y linked to the interpreter's real path with
// python and python3 linked to it, the include directory, site-packages,
// lib64 -> lib on 64-bit Linux, and the activate scripts from the
// interpreter's own venv templates (activate.go). It returns the activate
// scripts' env-relative paths.
func writeVenv(dir, final string, in *Interpreter, l Layout) ([]string, error) {
	for _, d := range []string{l.Bin, l.Include, l.SitePackages} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	if in.PointerBits == 64 && in.Markers["sys_platform"] != "darwin" && in.Markers["os_name"] == "posix" {
		if err := os.Symlink("lib", filepath.Join(dir, "lib64")); err != nil {
			return nil, err
		}
	}
	bin := filepath.Join(dir, l.Bin)
	if err := os.Symlink(in.Path, filepath.Join(bin, l.PythonXY)); err != nil {
		return nil, err
	}
	for _, n := range []string{"python", "python3"} {
		if n == l.PythonXY {
			continue
		}
		if err := os.Symlink(l.PythonXY, filepath.Join(bin, n)); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), pyvenvCfg(final, in), 0o644); err != nil {
		return nil, err
	}
	return writeActivate(dir, final, in, l)
}

// pyvenvCfg is what python -m venv --without-pip writes (CPython 3.11.7 and
// later: home, include-system-site-packages, version, executable, command),
// with the interpreter's real path in place of sys.executable.
func pyvenvCfg(final string, in *Interpreter) []byte {
	return fmt.Appendf(nil, "home = %s\ninclude-system-site-packages = false\nversion = %s\nexecutable = %s\ncommand = %s -m venv --without-pip %s\n",
		filepath.Dir(in.Path), in.VenvVersion, in.Path, in.Path, final)
}

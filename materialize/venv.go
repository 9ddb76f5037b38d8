package materialize

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
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
// in, as `python -m venv --without-pip final` of that interpreter would,
// without running it: the include directory, site-packages, lib64 -> lib
// on 64-bit POSIX other than macOS, bin/NAME linked to the interpreter's
// real path (NAME its base name) with python, python3 and, from 3.9 on,
// python3.Y linked to NAME, pyvenv.cfg (venvShape says which lines),
// .gitignore from 3.13 on, and the activate scripts from the
// interpreter's own venv templates (activate.go). It returns the activate
// scripts' env-relative paths.
//
// Where venv would name the interpreter it was run as, the env names its
// real path (a venv run as /usr/bin/python3 links bin/python3 to that link
// and writes it into pyvenv.cfg; the env links bin/python3.11 to the file
// the link resolves to): the env is bound to the binary the probe saw.
func writeVenv(dir, final string, in *Probe, l Layout) ([]string, error) {
	shape, err := readVenvShape(in)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{l.Bin, l.Include, l.SitePackages} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	if shape.gitignore {
		if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(venvGitignore), 0o644); err != nil {
			return nil, err
		}
	}
	if in.PointerBits == 64 && in.Markers["sys_platform"] != "darwin" && in.Markers["os_name"] == "posix" {
		if err := os.Symlink("lib", filepath.Join(dir, "lib64")); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), pyvenvCfg(final, in, shape), 0o644); err != nil {
		return nil, err
	}
	// setup_python: bin/NAME -> the interpreter, then each of the
	// names venv adds that is not NAME itself -> NAME.
	bin := filepath.Join(dir, l.Bin)
	exe := filepath.Base(in.Path)
	if err := os.Symlink(in.Path, filepath.Join(bin, exe)); err != nil {
		return nil, err
	}
	names := []string{"python", "python3"}
	if shape.minorLink {
		maj, min, _ := venvXY(in.VenvVersion)
		names = append(names, fmt.Sprintf("python%d.%d", maj, min))
	}
	for _, n := range names {
		if n == exe {
			continue
		}
		if err := os.Symlink(exe, filepath.Join(bin, n)); err != nil {
			return nil, err
		}
	}
	return writeActivate(dir, final, in, l)
}

// venvGitignore is what venv's create_git_ignore_file writes (3.13+).
const venvGitignore = "# Created by venv; see https://docs.python.org/3/library/venv.html\n*\n"

// venvShape is what one interpreter's `python -m venv --without-pip`
// writes beyond the directories every version makes.
type venvShape struct {
	// command: pyvenv.cfg ends with "executable =" and "command =" lines
	// (3.11+; 3.9 and 3.10 write home, include-system-site-packages and
	// version only).
	command bool
	// gitignore: ENV/.gitignore, which the venv CLI writes by default
	// (--without-scm-ignore-files turns it off; 3.13+).
	gitignore bool
	// minorLink: bin/python3.Y besides python and python3 (3.9+).
	minorLink bool
}

// The forms of venv/__init__.py that decide a venvShape, normalized by
// pyBody.
var (
	cfgPlain = []string{
		"context.cfg_path = path = os.path.join(context.env_dir, 'pyvenv.cfg')",
		"with open(path, 'w', encoding='utf-8') as f:",
		"f.write('home = %s\\n' % context.python_dir)",
		"if self.system_site_packages:",
		"incl = 'true'",
		"else:",
		"incl = 'false'",
		"f.write('include-system-site-packages = %s\\n' % incl)",
		"f.write('version = %d.%d.%d\\n' % sys.version_info[:3])",
		"if self.prompt is not None:",
		"f.write(f'prompt = {self.prompt!r}\\n')",
	}
	cfgCommandHead = append(slices.Clone(cfgPlain),
		"f.write('executable = %s\\n' % os.path.realpath(sys.executable))",
		"args = []",
		"nt = os.name == 'nt'",
		"if nt and self.symlinks:",
		"args.append('--symlinks')",
		"if not nt and not self.symlinks:",
		"args.append('--copies')",
		"if not self.with_pip:",
		"args.append('--without-pip')",
		"if self.system_site_packages:",
		"args.append('--system-site-packages')",
		"if self.clear:",
		"args.append('--clear')",
		"if self.upgrade:",
		"args.append('--upgrade')",
		"if self.upgrade_deps:",
		"args.append('--upgrade-deps')",
		"if self.orig_prompt is not None:",
		"args.append(f'--prompt=\"{self.orig_prompt}\"')",
	)
	cfgCommandTail = []string{
		"args.append(context.env_dir)",
		"args = ' '.join(args)",
		"f.write(f'command = {sys.executable} -m venv {args}\\n')",
	}
	// cfgCommand is 3.11 and 3.12; cfgCommandSCM is 3.13, which names
	// --without-scm-ignore-files when it was given.
	cfgCommand    = append(slices.Clone(cfgCommandHead), cfgCommandTail...)
	cfgCommandSCM = append(append(slices.Clone(cfgCommandHead),
		"if not self.scm_ignore_files:",
		"args.append('--without-scm-ignore-files')"), cfgCommandTail...)
	gitignoreBody = strings.Join([]string{
		"gitignore_path = os.path.join(context.env_dir, '.gitignore')",
		"with open(gitignore_path, 'w', encoding='utf-8') as file:",
		"file.write('# Created by venv; '",
		"'see https://docs.python.org/3/library/venv.html\\n')",
		"file.write('*\\n')",
	}, "\n")
	scmLoop = []string{
		"for scm in self.scm_ignore_files:",
		`getattr(self, f"create_{scm}_ignore_file")(context)`,
	}
	scmDefault = "default=frozenset(['git']),"
	suffixesXY = "for suffix in ('python', 'python3', f'python3.{sys.version_info[1]}'):"
	suffixes3  = "for suffix in ('python', 'python3'):"
)

// readVenvShape decides what venv writes for in: from its
// venv/__init__.py where that is one of the forms CPython has shipped
// (distributions patch venv, and backport fixes across versions), else
// from its version.
func readVenvShape(in *Probe) (venvShape, error) {
	maj, min, ok := venvXY(in.VenvVersion)
	if !ok {
		return venvShape{}, fmt.Errorf("the interpreter %s reported the version %q, not X.Y.Z", in.Path, in.VenvVersion)
	}
	newer := func(m int) bool { return maj > 3 || maj == 3 && min >= m }
	s := venvShape{command: newer(11), gitignore: newer(13), minorLink: newer(9)}
	b, ok, err := venvSource(in)
	if err != nil {
		return venvShape{}, err
	}
	if !ok {
		return s, nil
	}
	src := string(b)
	switch pyBody(src, "def create_configuration(self, context):") {
	case strings.Join(cfgPlain, "\n"):
		s.command = false
	case strings.Join(cfgCommand, "\n"), strings.Join(cfgCommandSCM, "\n"):
		s.command = true
	}
	switch git := pyBody(src, "def create_git_ignore_file(self, context):"); {
	case git == "" && !strings.Contains(src, "create_git_ignore_file"):
		s.gitignore = false // before 3.13
	case git == gitignoreBody && containsRun(strings.Split(pyBody(src, "def create(self, env_dir):"), "\n"), scmLoop):
		// The CLI's default decides; it is one argparse argument
		// over several lines, read by its default alone.
		s.gitignore = strings.Contains(src, scmDefault)
	}
	// setup_python is nested in `if os.name != 'nt':` from 3.13 on, so
	// its loop is read by its line alone.
	switch flat := normalizeSpaces(src); {
	case strings.Contains(flat, suffixesXY):
		s.minorLink = true
	case strings.Contains(flat, suffixes3):
		s.minorLink = false
	}
	return s, nil
}

// venvXY is the major and minor version of an "X.Y.Z" VenvVersion.
func venvXY(v string) (int, int, bool) {
	f := strings.Split(v, ".")
	if len(f) != 3 || f[2] == "" {
		return 0, 0, false
	}
	for _, n := range f[2] {
		if n < '0' || n > '9' {
			return 0, 0, false
		}
	}
	return parseXY(f[0] + "." + f[1])
}

// normalizeSpaces joins each parenthesized line continuation of src and
// collapses runs of white space, so that a statement split over lines
// reads as one.
func normalizeSpaces(src string) string {
	f := strings.Fields(src)
	s := strings.Join(f, " ")
	s = strings.ReplaceAll(s, "( ", "(")
	return strings.ReplaceAll(s, ", )", ",)")
}

// pyvenvCfg is what python -m venv --without-pip of in writes at final,
// with the interpreter's real path in place of sys.executable.
func pyvenvCfg(final string, in *Probe, s venvShape) []byte {
	b := fmt.Appendf(nil, "home = %s\ninclude-system-site-packages = false\nversion = %s\n", filepath.Dir(in.Path), in.VenvVersion)
	if s.command {
		b = fmt.Appendf(b, "executable = %s\ncommand = %s -m venv --without-pip %s\n", in.Path, in.Path, final)
	}
	return b
}

// venvSource reads the interpreter's venv/__init__.py (the source the
// venv layout and the activate scripts are derived from); ok is false
// when the interpreter has no venv package or the file is missing.
func venvSource(in *Probe) (src []byte, ok bool, err error) {
	if in.VenvDir == "" {
		return nil, false, nil
	}
	b, err := os.ReadFile(filepath.Join(in.VenvDir, "__init__.py"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

package materialize

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// The activate scripts (bin/activate, activate.csh, activate.fish,
// Activate.ps1) are what `python -m venv` of the env's own interpreter
// writes: its templates under venv/scripts/common and venv/scripts/posix,
// with the placeholders substituted as that interpreter's
// venv.EnvBuilder.replace_variables does. Python is not run for this: the
// substitution is read off the interpreter's venv/__init__.py, which must
// be one of the forms below; an interpreter without the venv package or
// its templates, or with a venv this code does not know, gets no activate
// scripts (docs/seal.md).

// venvForm is how one interpreter's venv fills its templates.
type venvForm struct {
	// quote: each value is quoted for the script's shell (gh-124651,
	// CVE-2024-9287: CPython 3.9.21, 3.10.16, 3.11.11, 3.12.8, 3.13.1 and
	// distributions' backports such as Debian's 3.11.2-6+deb12u4).
	quote bool
	// parens: the prompt is "(NAME) " (before 3.13), else "NAME".
	parens bool
}

// The two bodies of replace_variables that CPython has shipped, as
// normalized by pyBody.
var (
	replacePlain = strings.Join([]string{
		"text = text.replace('__VENV_DIR__', context.env_dir)",
		"text = text.replace('__VENV_NAME__', context.env_name)",
		"text = text.replace('__VENV_PROMPT__', context.prompt)",
		"text = text.replace('__VENV_BIN_NAME__', context.bin_name)",
		"text = text.replace('__VENV_PYTHON__', context.env_exe)",
		"return text",
	}, "\n")
	replaceQuoted = strings.Join([]string{
		"replacements = {",
		"'__VENV_DIR__': context.env_dir,",
		"'__VENV_NAME__': context.env_name,",
		"'__VENV_PROMPT__': context.prompt,",
		"'__VENV_BIN_NAME__': context.bin_name,",
		"'__VENV_PYTHON__': context.env_exe,",
		"}",
		"def quote_ps1(s):",
		`s = s.replace("'", "''")`,
		`return f"'{s}'"`,
		"def quote_bat(s):",
		"return s",
		"quote = shlex.quote",
		"script_path = context.script_path",
		"if script_path.endswith('.ps1'):",
		"quote = quote_ps1",
		"elif script_path.endswith('.bat'):",
		"quote = quote_bat",
		"else:",
		"quote = shlex.quote",
		"replacements = {key: quote(s) for key, s in replacements.items()}",
		"for key, quoted in replacements.items():",
		"text = text.replace(key, quoted)",
		"return text",
	}, "\n")
	promptParens = []string{
		"prompt = self.prompt if self.prompt is not None else context.env_name",
		"context.prompt = '(%s) ' % prompt",
	}
	promptBare = []string{
		"context.prompt = self.prompt if self.prompt is not None else context.env_name",
	}
)

// readVenvForm reads how a venv package whose __init__.py is src fills
// its templates; ok is false when src is not one of the known forms.
func readVenvForm(src string) (venvForm, bool) {
	var f venvForm
	switch pyBody(src, "def replace_variables(self, text, context):") {
	case replacePlain:
	case replaceQuoted:
		f.quote = true
	default:
		return f, false
	}
	ens := strings.Split(pyBody(src, "def ensure_directories(self, env_dir):"), "\n")
	parens, bare := containsRun(ens, promptParens), containsRun(ens, promptBare)
	if parens == bare {
		return f, false
	}
	f.parens = parens
	return f, true
}

// pyBody returns the body of the method that starts with the line def
// (indented by four spaces) with docstrings, comments and blank lines left
// out and each line trimmed, "" when it is not there exactly once.
func pyBody(src, def string) string {
	lines := strings.Split(src, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, " \r") == "    "+def {
			if start >= 0 {
				return ""
			}
			start = i + 1
		}
	}
	if start < 0 {
		return ""
	}
	var out []string
	inDoc := false
	for _, l := range lines[start:] {
		t := strings.TrimSpace(l)
		if t != "" && !inDoc && len(l)-len(strings.TrimLeft(l, " ")) <= 4 {
			break // the next method or the end of the class
		}
		if strings.HasPrefix(t, `"""`) {
			if !(len(t) >= 6 && strings.HasSuffix(t, `"""`)) {
				inDoc = !inDoc
			}
			continue
		}
		if inDoc {
			if strings.HasSuffix(t, `"""`) {
				inDoc = false
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, t)
	}
	return strings.Join(out, "\n")
}

func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// shlexQuote is Python's shlex.quote.
func shlexQuote(s string) string {
	if s == "" {
		return "''"
	}
	for _, c := range []byte(s) {
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0
		if !safe {
			return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
		}
	}
	return s
}

// fill is replace_variables of form f for the template at src.
func (f venvForm) fill(text, src string, vals [][2]string) string {
	quote := func(s string) string { return s }
	if f.quote {
		switch {
		case strings.HasSuffix(src, ".ps1"):
			quote = func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
		case strings.HasSuffix(src, ".bat"):
		default:
			quote = shlexQuote
		}
	}
	for _, kv := range vals {
		text = strings.ReplaceAll(text, kv[0], quote(kv[1]))
	}
	return text
}

// writeActivate writes the activate scripts of interpreter in into the
// staging env dir as python -m venv would write them into final, and
// returns their env-relative paths. It writes nothing (and no error) when
// the interpreter has no venv templates or a venv form not known here; a
// template that exists but cannot be read is an error.
func writeActivate(dir, final string, in *Probe, l Layout) ([]string, error) {
	src, ok, err := venvSource(in)
	if err != nil || !ok {
		return nil, err
	}
	form, ok := readVenvForm(string(src))
	if !ok {
		return nil, nil
	}
	prompt := filepath.Base(final)
	if form.parens {
		prompt = "(" + prompt + ") "
	}
	// The order is replace_variables' own: each replacement applies to
	// the text the previous ones left.
	vals := [][2]string{
		{"__VENV_DIR__", final},
		{"__VENV_NAME__", filepath.Base(final)},
		{"__VENV_PROMPT__", prompt},
		{"__VENV_BIN_NAME__", l.Bin},
		// venv names the interpreter it was run as; the env links to
		// the real one (no posix template uses this placeholder).
		{"__VENV_PYTHON__", filepath.Join(final, filepath.FromSlash(l.Bin), filepath.Base(in.Path))},
	}
	w := &activateWriter{dir: dir, bin: l.Bin, form: form, vals: vals, seen: map[string]bool{}}
	scripts := filepath.Join(in.VenvDir, "scripts")
	// install_scripts walks scripts/ (os.walk: directory order, which
	// ReadDir on an open directory keeps) and takes common/ and the
	// os.name directory; a later file of the same name overwrites.
	top, err := readDirUnsorted(scripts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range top {
		if n := e.Name(); (n == "common" || n == "posix") && e.IsDir() {
			if err := w.walk(filepath.Join(scripts, n), ""); err != nil {
				return nil, err
			}
		}
	}
	return w.names, nil
}

type activateWriter struct {
	dir, bin string
	form     venvForm
	vals     [][2]string
	seen     map[string]bool
	names    []string
}

// walk installs the templates under src into bin/sub.
func (w *activateWriter) walk(src, sub string) error {
	ents, err := readDirUnsorted(src)
	if err != nil {
		return err
	}
	var dirs []string
	for _, e := range ents {
		p := filepath.Join(src, e.Name())
		fi, err := os.Stat(p) // os.walk sorts entries by is_dir(), which follows links
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if e.Type()&fs.ModeSymlink == 0 { // os.walk does not descend into linked directories
				dirs = append(dirs, e.Name())
			}
			continue
		}
		if err := w.file(p, path.Join(w.bin, sub, e.Name()), fi.Mode().Perm()); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := w.walk(filepath.Join(src, d), path.Join(sub, d)); err != nil {
			return err
		}
	}
	return nil
}

// file writes one template. A template that is not UTF-8 is left out, as
// venv leaves it out (with a warning). venv's Windows launchers
// (.exe/.pdb) live only under scripts/nt, which is never read here.
func (w *activateWriter) file(src, rel string, mode fs.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if !utf8.Valid(b) {
		return nil
	}
	out := []byte(w.form.fill(string(b), src, w.vals))
	dst := filepath.Join(w.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		return err
	}
	// shutil.copymode: the template's permission bits, whatever the umask.
	if err := os.Chmod(dst, mode); err != nil {
		return err
	}
	if !w.seen[rel] {
		w.seen[rel] = true
		w.names = append(w.names, rel)
	}
	return nil
}

// readDirUnsorted lists a directory in the order the file system returns
// it (os.ReadDir sorts; Python's os.scandir does not).
func readDirUnsorted(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

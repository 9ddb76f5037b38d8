package invoke

import (
	"debug/elf"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Sandbox gives the launcher argv prepended to the interpreter's for one
// run, which knows its workdir.
type Sandbox interface {
	Argv(c *Call, workdir string) ([]string, error)
}

// Launcher is a fixed launcher argv (no per-run arguments).
type Launcher []string

// Argv implements Sandbox.
func (l Launcher) Argv(*Call, string) ([]string, error) { return append([]string(nil), l...), nil }

// Bwrap is the bubblewrap preset: no network (--unshare-net), its own IPC
// and UTS namespaces, a fresh /proc and a minimal /dev, and nothing of the
// host's file system visible but the env (read-only), ReadOnly (read-only:
// the interpreter's real path, its stdlib directory, libpython, and the
// system library directories the dynamic loader needs) and the run's
// workdir (read-write, the working directory). Top-level symlinks of the
// host that a bound path goes through (/lib -> usr/lib on a merged /usr)
// are recreated.
type Bwrap struct {
	// Path is the bwrap binary ("": bwrap, looked up on PATH by os/exec).
	Path string
	// ReadOnly are the host paths bound read-only besides the env.
	ReadOnly []string
}

// Argv implements Sandbox.
func (b Bwrap) Argv(c *Call, workdir string) ([]string, error) {
	path := b.Path
	if path == "" {
		path = "bwrap"
	}
	argv := []string{path, "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
		"--proc", "/proc", "--dev", "/dev"}
	links := map[string]string{}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if t, err := os.Readlink(top); err == nil {
			links[top] = t
		}
	}
	var names []string
	for l := range links {
		names = append(names, l)
	}
	sort.Strings(names)
	for _, l := range names {
		argv = append(argv, "--symlink", links[l], l)
	}
	env, err := filepath.Abs(c.Env)
	if err != nil {
		return nil, err
	}
	argv = append(argv, "--ro-bind", env, env)
	for _, p := range b.ReadOnly {
		if _, isLink := links[p]; isLink {
			continue
		}
		argv = append(argv, "--ro-bind-try", p, p)
	}
	return append(argv, "--bind", workdir, workdir, "--chdir", workdir, "--"), nil
}

// BwrapFor returns the Bwrap preset (bwrap at path, "": on PATH) for envs
// sealed against the interpreter whose real path is python, of version
// version ("3.11.7"), with its libpython's real path libpython ("":
// statically linked), as a seal records them (seal.InterpreterIdentity).
// Its ReadOnly are InterpreterPaths.
func BwrapFor(path, python, version, libpython string) Bwrap {
	return Bwrap{Path: path, ReadOnly: InterpreterPaths(python, version, libpython)}
}

// InterpreterPaths returns the host paths a run of the interpreter at real
// path python needs visible, derived from what a seal records of it
// without running it: the interpreter; its stdlib, PREFIX/lib/pythonX.Y
// and PREFIX/lib64/pythonX.Y where PREFIX is the parent of the bin
// directory the interpreter is in (its sys.base_prefix for the usual
// layouts); the directory of libpython, if any; and, read from the
// interpreter's ELF header, the directory of its dynamic loader as named
// and as resolved (the system library directory, where libc and the
// libraries beside it are). A path that does not exist is bound by Bwrap
// only if it exists (--ro-bind-try).
func InterpreterPaths(python, version, libpython string) []string {
	ro := []string{python}
	if bin := filepath.Dir(python); filepath.Base(bin) == "bin" {
		prefix := filepath.Dir(bin)
		if xy := minorVersion(version); xy != "" {
			ro = append(ro, filepath.Join(prefix, "lib", "python"+xy), filepath.Join(prefix, "lib64", "python"+xy))
		}
	}
	if libpython != "" {
		ro = append(ro, filepath.Dir(libpython))
	}
	if f, err := elf.Open(python); err == nil {
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			if p.Filesz > 4096 { // PATH_MAX: not a loader's name
				break
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				break
			}
			loader := strings.TrimRight(string(b), "\x00")
			if d, err := filepath.EvalSymlinks(filepath.Dir(loader)); err == nil {
				ro = append(ro, d)
			}
			if r, err := filepath.EvalSymlinks(loader); err == nil {
				ro = append(ro, filepath.Dir(r))
			}
			break
		}
		f.Close()
	}
	seen := map[string]bool{}
	out := ro[:0]
	for _, p := range ro {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// minorVersion returns "X.Y" of a version "X.Y[…]" (Y its leading
// digits), or "".
func minorVersion(v string) string {
	x, rest, ok := strings.Cut(v, ".")
	y := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
	if !ok || x == "" || y == "" {
		return ""
	}
	return x + "." + y
}

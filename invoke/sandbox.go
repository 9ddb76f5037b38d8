package invoke

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/elfread"
	"github.com/cruxible/cruxprov/refusal"
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

// Bwrap is the bubblewrap preset: no network (--unshare-net), its own IPC,
// UTS and pid namespaces, a fresh /proc (read-only) and a minimal /dev, no
// capability (--cap-drop ALL, also when root runs it), and nothing of the
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

	unusable string // BwrapFor's reason the interpreter cannot run in it
}

// Argv implements Sandbox. A preset BwrapFor made for an interpreter whose
// standard library it cannot find is refused invoke_failed, saying what
// to do, before anything runs.
func (b Bwrap) Argv(c *Call, workdir string) ([]string, error) {
	if b.unusable != "" {
		return nil, refusal.New(refusal.InvokeFailed, "%s", b.unusable)
	}
	path := b.Path
	if path == "" {
		path = "bwrap"
	}
	// Its own pid namespace, so that the /proc it mounts is fresh: without
	// one, bwrap cannot mount a procfs in the executor's pid namespace and
	// binds the host's /proc instead (every host process and its command
	// line visible). /proc read-only: a root run's uid 0 needs no
	// capability to write the host's /proc/sys (kernel.core_pattern runs
	// a helper as root outside every namespace) or /proc/sysrq-trigger.
	// No capability: bwrap started by root keeps them all, and a provider
	// remounted its read-only binds (the env, the host's stdlib) to write
	// them.
	argv := []string{path, "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-pid", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"}
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
//
// Where no directory above the interpreter holds its stdlib (CPython then
// falls back to the prefix compiled into it, which cannot be known without
// running it), the preset refuses every run (Argv) invoke_failed naming
// the interpreter and what to do: inside the sandbox it would find no
// stdlib and die with Python's opaque "No module named 'encodings'".
func BwrapFor(path, python, version, libpython string) Bwrap {
	b := Bwrap{Path: path, ReadOnly: InterpreterPaths(python, version, libpython)}
	if xy := minorVersion(version); xy != "" {
		if _, ok := stdlibDirs(python, xy); !ok {
			b.unusable = fmt.Sprintf("the bwrap sandbox cannot show the sealed interpreter %s its standard library: no directory above it holds lib/python%s/os.py, "+
				"so CPython uses the prefix compiled into it, which the sandbox cannot know; run without the sandbox, or seal the env on an interpreter "+
				"installed as PREFIX/bin/python%s with its stdlib in PREFIX/lib/python%s (a python.org, pyenv or distribution build)", python, xy, xy, xy)
		}
	}
	return b
}

// stdlibDirs returns the stdlib directories CPython's getpath finds for
// the interpreter at real path python, of version xy ("3.11"), searching
// up from the directory it is in as getpath does: the first directory
// holding lib/pythonX.Y/os.py (or os.pyc; lib64 for a platlibdir of
// lib64) is its prefix, the first holding lib/pythonX.Y/lib-dynload its
// exec prefix. ok is false when no prefix was found.
func stdlibDirs(python, xy string) (dirs []string, ok bool) {
	found := func(landmarks ...string) []string {
		for d := filepath.Dir(python); ; d = filepath.Dir(d) {
			var hits []string
			for _, lib := range []string{"lib", "lib64"} {
				sub := filepath.Join(d, lib, "python"+xy)
				for _, l := range landmarks {
					if _, err := os.Stat(filepath.Join(sub, l)); err == nil {
						hits = append(hits, sub)
						break
					}
				}
			}
			if len(hits) > 0 || d == filepath.Dir(d) {
				return hits
			}
		}
	}
	prefix := found("os.py", "os.pyc")
	return append(prefix, found("lib-dynload")...), len(prefix) > 0
}

// InterpreterPaths returns the host paths a run of the interpreter at real
// path python needs visible, derived from what a seal records of it
// without running it: the interpreter; its stdlib, PREFIX/lib/pythonX.Y
// and PREFIX/lib64/pythonX.Y where PREFIX is the parent of the bin
// directory the interpreter is in (its sys.base_prefix for the usual
// layouts), and the stdlib and lib-dynload directories CPython's getpath
// finds above the interpreter wherever it is (stdlibDirs: a build
// unpacked as /opt/py/python3.11 with /opt/py/lib/python3.11); the
// directory of libpython, if any; and, read from the
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
	if xy := minorVersion(version); xy != "" {
		dirs, _ := stdlibDirs(python, xy)
		ro = append(ro, dirs...)
	}
	if libpython != "" {
		ro = append(ro, filepath.Dir(libpython))
	}
	ro = append(ro, runpathDirs(interpreterObjects(python, version, libpython))...)
	if loader, ok := interpOf(python); ok {
		if d, err := filepath.EvalSymlinks(filepath.Dir(loader)); err == nil {
			ro = append(ro, d)
		}
		if r, err := filepath.EvalSymlinks(loader); err == nil {
			ro = append(ro, filepath.Dir(r))
		}
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

// interpOf is the loader the ELF file at path names (its PT_INTERP), if
// it names one.
func interpOf(path string) (string, bool) {
	info, err := readELF(path, elfread.Options{})
	return info.Interp, err == nil && info.Dynamic && info.Interp != ""
}

// readELF reads the ELF file at path (a regular file, not waited on),
// bounded and without panicking on a malformed one (elfread).
func readELF(path string, o elfread.Options) (elfread.Info, error) {
	f, err := capped.Open(path)
	if err != nil {
		return elfread.Info{}, err
	}
	defer f.Close()
	return elfread.Read(f, o)
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

// maxRunpathObjects bounds the ELF files whose run paths InterpreterPaths
// reads (a stdlib has about 70 extension modules).
const maxRunpathObjects = 4096

// interpreterObjects returns the ELF files of the interpreter at real path
// python that its runs load from the host: itself, libpython, and the
// extension modules (*.so) in its stdlib's lib-dynload directories.
func interpreterObjects(python, version, libpython string) []string {
	objs := []string{python}
	if libpython != "" {
		objs = append(objs, libpython)
	}
	xy := minorVersion(version)
	if xy == "" {
		return objs
	}
	dirs, _ := stdlibDirs(python, xy)
	if bin := filepath.Dir(python); filepath.Base(bin) == "bin" {
		prefix := filepath.Dir(bin)
		dirs = append(dirs, filepath.Join(prefix, "lib", "python"+xy), filepath.Join(prefix, "lib64", "python"+xy))
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		dyn := filepath.Join(d, "lib-dynload")
		if seen[dyn] {
			continue
		}
		seen[dyn] = true
		mods, _ := filepath.Glob(filepath.Join(dyn, "*.so"))
		objs = append(objs, mods...)
		if len(objs) > maxRunpathObjects {
			return objs[:maxRunpathObjects]
		}
	}
	return objs
}

// runpathDirs returns the directories the run paths (DT_RUNPATH and
// DT_RPATH) of the ELF files objs name, where they exist: the dynamic
// loader looks there for the libraries those files need, so a sandbox
// that shows the files must show the directories too. $ORIGIN is
// expanded to the directory of the file as named and as resolved (the
// loader takes the one it opened); an entry with another dynamic string
// token ($LIB, $PLATFORM), a relative one, and / itself are left out.
func runpathDirs(objs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		d = filepath.Clean(d)
		if !filepath.IsAbs(d) || d == "/" || seen[d] {
			return
		}
		seen[d] = true
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return
		}
		out = append(out, d)
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, obj := range objs {
		info, err := readELF(obj, elfread.Options{Runpaths: true})
		if err != nil {
			continue
		}
		paths := info.Runpaths
		origins := []string{filepath.Dir(obj)}
		if r, err := filepath.EvalSymlinks(obj); err == nil && filepath.Dir(r) != origins[0] {
			origins = append(origins, filepath.Dir(r))
		}
		for _, p := range paths {
			for _, e := range strings.Split(p, ":") {
				if !strings.Contains(e, "$") {
					add(e)
					continue
				}
				for _, o := range origins {
					x := strings.NewReplacer("${ORIGIN}", o, "$ORIGIN", o).Replace(e)
					if !strings.Contains(x, "$") {
						add(x)
					}
				}
			}
		}
	}
	return out
}

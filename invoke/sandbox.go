package invoke

import (
	"os"
	"path/filepath"
	"sort"
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
	argv := []string{path, "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
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

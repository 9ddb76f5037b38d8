//go:build linux

package watch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/seal"
)

// changes are the events subscribed: everything that can change what a
// verify reads, nothing that only reads.
const changes = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW

// selfGone are the events after which a watch no longer covers its path.
const selfGone = unix.IN_Q_OVERFLOW | unix.IN_IGNORED | unix.IN_UNMOUNT | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// maxHops bounds the symlinks followed from one path (as the kernel's 40).
const maxHops = 40

// target is what one watch descriptor stands for: every event counts
// (all), or only events naming one of names.
type target struct {
	all   bool
	names map[string]bool
}

// watcher is one inotify instance and its watches.
type watcher struct {
	fd      int
	targets map[int32]*target
	buf     []byte
	// roots are the paths the Spec and the seal name, each with the file
	// it resolved to when armed. A directory renamed or replaced above a
	// watched path (the store moved aside and a copy put in its place, a
	// symlink above it re-pointed) raises no event on any watch, so each
	// check stats them too: one that resolves elsewhere is a change.
	roots []root
}

// root is a path and the file (device, inode) it resolved to.
type root struct {
	path     string
	dev, ino uint64
}

// pin records the file path resolves to now (following symlinks).
func (w *watcher) pin(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("watch: cannot watch %s: %w", path, err)
	}
	w.roots = append(w.roots, root{path, uint64(st.Dev), st.Ino})
	return nil
}

// moved reports whether a root resolves to another file than when armed.
func (w *watcher) moved() bool {
	var st unix.Stat_t
	for _, r := range w.roots {
		if err := unix.Stat(r.path, &st); err != nil || uint64(st.Dev) != r.dev || st.Ino != r.ino {
			return true
		}
	}
	return false
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if errors.Is(err, unix.EMFILE) {
		// Also this process's open-file limit, but first the per-user
		// instance limit: strerror's "too many open files" sends one to
		// ulimit -n, which does not raise it.
		return nil, fmt.Errorf("watch: inotify_init1: the inotify instance limit of this user is reached (fs.inotify.max_user_instances; each Verifier holds one instance, every process of the user counts), or this process's open-file limit (ulimit -n): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("watch: inotify_init1: %w", err)
	}
	return &watcher{fd: fd, targets: map[int32]*target{}}, nil
}

func (w *watcher) close() {
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}

// add watches path (not following a final symlink): every event when
// name is "", else only events naming name (path is then a directory).
func (w *watcher) add(path string, dir bool, name string) error {
	mask := uint32(changes)
	if dir {
		mask |= unix.IN_ONLYDIR
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, mask)
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("watch: cannot watch %s: the inotify watch limit is reached (fs.inotify.max_user_watches): %w", path, err)
		}
		return fmt.Errorf("watch: cannot watch %s: %w", path, err)
	}
	t := w.targets[int32(wd)]
	if t == nil {
		t = &target{}
		w.targets[int32(wd)] = t
	}
	if name == "" {
		t.all = true
	} else {
		if t.names == nil {
			t.names = map[string]bool{}
		}
		t.names[name] = true
	}
	return nil
}

// changed drains the queue without blocking and reports whether any event
// concerns what is watched: an overflow, a watch gone, an event on a watch
// whose every event counts, or one naming a watched entry; or whether a
// root resolves to another file than when armed. A failed read counts as
// a change.
func (w *watcher) changed() bool {
	if w.fd < 0 {
		return true
	}
	if w.buf == nil {
		w.buf = make([]byte, 64<<10)
	}
	dirty := false
	for {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return dirty || w.moved()
		}
		if err != nil || n < unix.SizeofInotifyEvent {
			return true
		}
		if w.relevant(w.buf[:n]) {
			dirty = true
		}
	}
}

// relevant parses the events in b.
func (w *watcher) relevant(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		if unix.SizeofInotifyEvent+n > len(b) {
			return true
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n], "\x00"))
		b = b[unix.SizeofInotifyEvent+n:]
		if mask&selfGone != 0 {
			return true
		}
		t := w.targets[wd]
		if t == nil || t.all || name == "" || t.names[name] {
			return true
		}
	}
	return false
}

// arm places every watch of spec in a new inotify instance. On error the
// returned watcher (possibly nil) does not cover everything.
func arm(ctx context.Context, spec Spec) (*watcher, error) {
	w, err := newWatcher()
	if err != nil {
		return nil, err
	}
	if spec.Env == "" {
		return w, errors.New("watch: the spec names no env")
	}
	env, _, err := w.follow(spec.Env)
	if err != nil {
		return w, err
	}
	// The env's path resolving to the same directory covers its seal
	// and index too: they cannot leave the watched envs/ without an event.
	if err := w.pin(spec.Env); err != nil {
		return w, err
	}
	parent, base := filepath.Dir(env), filepath.Base(env)
	for _, n := range []string{base, base + ".seal.json", base + ".index"} {
		if err := w.add(parent, true, n); err != nil {
			return w, err
		}
	}
	for _, p := range []string{seal.SealPath(env), seal.StatIndexPath(env)} {
		if err := w.add(p, false, ""); err != nil {
			return w, err
		}
	}
	// The seal is read only now that it is watched: a change from here on
	// is an event.
	files := []string{spec.Interpreter, spec.LibPython}
	b, err := os.ReadFile(seal.SealPath(env))
	if err != nil {
		return w, fmt.Errorf("watch: cannot read the seal for the interpreter's paths: %w", err)
	}
	s, err := seal.Parse(b)
	if err != nil {
		return w, fmt.Errorf("watch: cannot read the seal for the interpreter's paths: %w", err)
	}
	files = append(files, s.Interpreter.Path)
	if s.Interpreter.LibPython != nil {
		files = append(files, s.Interpreter.LibPython.Path)
	}
	if err := w.tree(ctx, env); err != nil {
		return w, err
	}
	for _, p := range files {
		if p == "" {
			continue
		}
		if _, _, err := w.follow(p); err != nil {
			return w, err
		}
		if err := w.pin(p); err != nil {
			return w, err
		}
	}
	for _, p := range spec.Extra {
		if p == "" {
			continue
		}
		real, fi, err := w.follow(p)
		if err != nil {
			return w, err
		}
		if err := w.pin(p); err != nil {
			return w, err
		}
		if fi.IsDir() {
			if err := w.tree(ctx, real); err != nil {
				return w, err
			}
		}
	}
	return w, nil
}

// follow watches path and each symlink hop from it (each hop's real
// directory, for events naming it), then the final file or directory
// itself, and returns the final real path.
func (w *watcher) follow(p string) (string, fs.FileInfo, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", nil, fmt.Errorf("watch: %w", err)
	}
	for hop := 0; hop <= maxHops; hop++ {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return "", nil, fmt.Errorf("watch: cannot watch %s: %w", p, err)
		}
		name := filepath.Base(p)
		p = filepath.Join(dir, name)
		if err := w.add(dir, true, name); err != nil {
			return "", nil, err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", nil, fmt.Errorf("watch: cannot watch %s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if err := w.add(p, fi.IsDir(), ""); err != nil {
				return "", nil, err
			}
			return p, fi, nil
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", nil, fmt.Errorf("watch: cannot watch %s: %w", p, err)
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(dir, t)
		}
		p = filepath.Clean(t)
	}
	return "", nil, fmt.Errorf("watch: cannot watch %s: more than %d symlinks", p, maxHops)
}

// tree watches root and every directory under it, each before it is
// listed, so a directory created meanwhile is an event. Symlinks are not
// followed.
func (w *watcher) tree(ctx context.Context, root string) error {
	stack := []string{root}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if err := w.add(d, true, ""); err != nil {
			return err
		}
		f, err := os.Open(d)
		if err != nil {
			return fmt.Errorf("watch: cannot list %s: %w", d, err)
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return fmt.Errorf("watch: cannot list %s: %w", d, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				stack = append(stack, filepath.Join(d, e.Name()))
			}
		}
	}
	return nil
}

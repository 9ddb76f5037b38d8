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
	"strings"
	"syscall"

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

// pin records that path resolved, when follow watched it, to the file fi
// (follow's own Lstat of the final file, not a second stat: a path
// re-pointed between the two would pin one file and watch another).
func (w *watcher) pin(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("watch: cannot watch %s: no device and inode", path)
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

// relevant parses the events in b. What does not parse as whole events
// (a name running past the read, bytes left over after the last event)
// counts as a change, as a failed read does.
func (w *watcher) relevant(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		n := uint64(binary.NativeEndian.Uint32(b[12:])) // no int: negative on 32 bits
		if n > uint64(len(b)-unix.SizeofInotifyEvent) {
			return true
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+int(n)], "\x00"))
		b = b[unix.SizeofInotifyEvent+int(n):]
		if mask&selfGone != 0 {
			return true
		}
		t := w.targets[wd]
		if t == nil || t.all || name == "" || t.names[name] {
			return true
		}
	}
	return len(b) != 0
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
	env, efi, err := w.follow(spec.Env)
	if err != nil {
		return w, err
	}
	// The env's path resolving to the same directory covers its seal
	// and index too: they cannot leave the watched envs/ without an event.
	if err := w.pin(spec.Env, efi); err != nil {
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
	// The env's own symlinks are sealed as links (their targets' text),
	// never followed by a verify: not followed here either.
	if err := w.tree(ctx, env, false); err != nil {
		return w, err
	}
	for _, p := range files {
		if p == "" {
			continue
		}
		_, fi, err := w.follow(p)
		if err != nil {
			return w, err
		}
		if err := w.pin(p, fi); err != nil {
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
		if err := w.pin(p, fi); err != nil {
			return w, err
		}
		if fi.IsDir() {
			// A reader of the registry follows its symlinks (a pins/
			// on another volume): so does its watch.
			if err := w.tree(ctx, real, true); err != nil {
				return w, err
			}
		}
	}
	return w, nil
}

// follow resolves p as the kernel does, one component at a time from
// "/": a symlink's target read and resolved in its turn, ".." the parent
// of the directory reached (physically: the target "x/../y" of a link
// whose x is itself a link is not "y" beside it). Each directory it takes a
// component from is watched, before that component is read, for events
// naming it, so a component renamed, replaced or re-pointed anywhere along
// the path from then on is an event; then the final file or directory
// itself is watched. It returns the final real path and its Lstat.
//
// A directory this user may search but not read (an operator's home of
// 0711 above the store) cannot be watched (inotify needs read
// permission): above the final component's own directory, such a
// directory is passed unwatched, and a change there is seen by the
// check's stat of the path (moved) rather than by an event.
func (w *watcher) follow(p string) (string, fs.FileInfo, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", nil, fmt.Errorf("watch: %w", err)
	}
	dir := "/"
	rest := components(abs)
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == ".." {
			dir = filepath.Dir(dir)
			continue
		}
		last := len(rest) == 0
		if err := w.add(dir, true, c); err != nil && (last || !errors.Is(err, unix.EACCES)) {
			return "", nil, err
		}
		next := filepath.Join(dir, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", nil, fmt.Errorf("watch: cannot watch %s: %w", abs, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > maxHops {
				return "", nil, fmt.Errorf("watch: cannot watch %s: more than %d symlinks", abs, maxHops)
			}
			t, err := os.Readlink(next)
			if err != nil {
				return "", nil, fmt.Errorf("watch: cannot watch %s: %w", abs, err)
			}
			if filepath.IsAbs(t) {
				dir = "/"
			}
			rest = append(components(t), rest...)
			continue
		}
		if len(rest) > 0 && !fi.IsDir() {
			return "", nil, fmt.Errorf("watch: cannot watch %s: %s is not a directory", abs, next)
		}
		dir = next
	}
	fi, err := os.Lstat(dir) // the final file ("/" when p names it)
	if err != nil {
		return "", nil, fmt.Errorf("watch: cannot watch %s: %w", abs, err)
	}
	if err := w.add(dir, fi.IsDir(), ""); err != nil {
		return "", nil, err
	}
	return dir, fi, nil
}

// components splits a path into its names, "." and empty ones left out.
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// tree watches root and every directory under it, each before it is
// listed, so a directory created meanwhile is an event. With links, a
// symlink in it is followed (follow: its hops and its target watched) and
// a directory it leads to watched likewise, once; without, symlinks are
// entries like any other.
func (w *watcher) tree(ctx context.Context, root string, links bool) error {
	stack := []string{root}
	seen := map[string]bool{root: true}
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
			next := filepath.Join(d, e.Name())
			if links && e.Type()&fs.ModeSymlink != 0 {
				real, fi, err := w.follow(next)
				if err != nil {
					return err
				}
				if !fi.IsDir() {
					continue
				}
				next = real
			} else if !e.IsDir() {
				continue
			}
			if !seen[next] {
				seen[next] = true
				stack = append(stack, next)
			}
		}
	}
	return nil
}

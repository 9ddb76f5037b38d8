package seal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/treehash"
)

// visitFunc is called for every entry below the root, in directory order,
// with the directory's fd, the entry's name and its lstat. Returning
// errSkip for a directory does not descend into it.
type visitFunc func(rel string, dirfd int, name string, st *unix.Stat_t) error

var errSkip = errors.New("skip directory")

// scan walks root depth-first with one fstatat(AT_SYMLINK_NOFOLLOW) per
// entry, relative to an open directory fd (no path resolution per entry).
// Links are never followed.
func scan(ctx context.Context, root string, visit visitFunc) error {
	rootfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootfd)
	stack := []string{""}
	var names []string
	buf := make([]byte, 32<<10)
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fd := rootfd
		if rel != "" {
			fd, err = unix.Openat(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
			if err != nil {
				return &os.PathError{Op: "open", Path: rel, Err: err}
			}
		}
		names, err = readNames(fd, buf, names[:0])
		if err == nil {
			for _, name := range names {
				p := name
				if rel != "" {
					p = rel + "/" + name
				}
				var st unix.Stat_t
				if err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					err = &os.PathError{Op: "lstat", Path: p, Err: err}
					break
				}
				err = visit(p, fd, name, &st)
				if err == errSkip {
					err = nil
					continue
				}
				if err != nil {
					break
				}
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					stack = append(stack, p)
				}
			}
		} else {
			err = &os.PathError{Op: "readdir", Path: relOrDot(rel), Err: err}
		}
		if fd != rootfd {
			unix.Close(fd)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readNames lists a freshly opened directory's names (without "." and
// "..") with getdents.
func readNames(fd int, buf []byte, names []string) ([]string, error) {
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// kindOf maps a stat mode to a tree entry kind; ok is false for anything
// but a regular file, directory or symlink.
func kindOf(mode uint32) (treehash.Kind, bool) {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return treehash.File, true
	case unix.S_IFDIR:
		return treehash.Dir, true
	case unix.S_IFLNK:
		return treehash.Symlink, true
	}
	return 0, false
}

func kindName(k treehash.Kind) string {
	switch k {
	case treehash.File:
		return "file"
	case treehash.Dir:
		return "directory"
	case treehash.Symlink:
		return "symlink"
	}
	return "special file"
}

func entryOf(rel string, st *unix.Stat_t, kind treehash.Kind) Entry {
	e := Entry{Path: rel, Kind: kind, Mode: st.Mode & 0o7777, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(), Ino: st.Ino}
	if kind != treehash.Dir {
		e.Size = st.Size
	}
	return e
}

// readlinkAt returns the target of the symlink name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
}

// hashAll hashes the regular files root/paths[i] into sums[i] with jobs
// workers (jobs < 1: GOMAXPROCS); sizes[i] receives the size read. The first
// error (in index order) wins; ctx cancels.
func hashAll(ctx context.Context, root string, paths []string, sums [][32]byte, sizes []int64, jobs int) error {
	if jobs < 1 {
		jobs = runtime.GOMAXPROCS(0)
	}
	jobs = min(jobs, len(paths))
	var (
		next    atomic.Int64
		mu      sync.Mutex
		first   error
		firstAt = len(paths)
		wg      sync.WaitGroup
	)
	for range jobs {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) {
					return
				}
				err := ctx.Err()
				if err == nil {
					sums[i], sizes[i], err = treehash.HashFile(filepath.Join(root, filepath.FromSlash(paths[i])))
				}
				if err != nil {
					mu.Lock()
					if i < firstAt {
						first, firstAt = err, i
					}
					mu.Unlock()
					next.Store(int64(len(paths)))
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// Known is what the builder already knows about a file it wrote: its size
// and sha256, so that Freeze need not read it back, and, when Stamp.Ino is
// set, the stat it took of the file once written, so that Freeze need not
// stat it either.
type Known struct {
	Size   int64
	SHA256 [32]byte
	Stamp  Stamp
}

// Stamp is what a writer saw of a regular file it created, on the open
// descriptor after its last write: what Freeze would record for the file.
// Freeze takes it instead of a stat of its own only while the directory
// still lists that inode and the stamp shows the sealed mode (0444, or
// 0555 when executable) and the known size; a change made to the file
// after the stamp was taken changes its ctime, which verify sees.
type Stamp struct {
	Ino     uint64
	Mode    uint32 // permission bits (mode & 07777)
	Size    int64
	MtimeNS int64
	CtimeNS int64
}

// StampOf stats the open regular file fd.
func StampOf(fd int) (Stamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Stamp{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Stamp{}, fmt.Errorf("not a regular file")
	}
	return Stamp{Ino: st.Ino, Mode: st.Mode & 0o7777, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}, nil
}

// entry is the stat index entry of the file at p with the known k, when
// its stamp can stand for a stat: the directory lists inode ino there.
func (k *Known) entry(p string, ino uint64) (Entry, bool) {
	s := &k.Stamp
	if s.Ino == 0 || s.Ino != ino || s.Size != k.Size || s.Mode != sealedFileMode(s.Mode) {
		return Entry{}, false
	}
	return Entry{Path: p, Kind: treehash.File, Mode: s.Mode, Size: s.Size, MtimeNS: s.MtimeNS, CtimeNS: s.CtimeNS, Ino: ino, SHA256: k.SHA256}, true
}

// sealedFileMode is the mode Freeze gives a regular file of mode m.
func sealedFileMode(m uint32) uint32 {
	if m&0o111 != 0 {
		return 0o555
	}
	return 0o444
}

// Freeze makes the tree at root read-only (regular files 0444, or 0555 when
// any execute bit is set; directories 0555; the root last) and returns its
// stat index, taken after the modes changed. Files listed in known with a
// matching size are not read again (nor stat'ed, when their stamp stands:
// Known); every other file is hashed as it is found. Directories are frozen
// by jobs threads at once (jobs < 1: GOMAXPROCS), each taking the next
// directory waiting. A name that is not UTF-8 or an entry that is not a
// file, directory or symlink is an error.
func Freeze(ctx context.Context, root string, known map[string]Known, jobs int) (*StatIndex, error) {
	return NewFreezer(root, jobs).Finish(ctx, known)
}

// A Freezer freezes a tree in parts, as Freeze does at once: Subtrees
// freezes directories whose contents are final while files are still
// being written elsewhere in the tree (a builder's bytecode), and Finish
// freezes the rest and returns the stat index of the whole tree. A
// directory's stat is taken after its entries and its mode are final, so
// that an entry added to a frozen directory later is seen by verify as a
// change of the directory. Its methods are called one at a time.
type Freezer struct {
	root  string
	jobs  int
	pre   []Entry           // the entries of the frozen subtrees
	roots map[string]uint64 // each frozen subtree's root → its inode
}

// NewFreezer returns a Freezer of the tree at root, freezing with jobs
// threads at once (jobs < 1: GOMAXPROCS).
func NewFreezer(root string, jobs int) *Freezer {
	if jobs < 1 {
		jobs = runtime.GOMAXPROCS(0)
	}
	return &Freezer{root: root, jobs: min(jobs, 64), roots: map[string]uint64{}}
}

// Subtrees freezes the directories rels (relative to the root, none below
// another, none frozen already) and everything below them, as Finish would:
// nothing may be written in them afterwards. known is read while it runs.
func (fz *Freezer) Subtrees(ctx context.Context, rels []string, known map[string]Known) error {
	queue := slices.Clone(rels)
	slices.Sort(queue)
	for i, r := range queue {
		if r == "" || r == "." || !validPath(r) {
			return fmt.Errorf("%q: not a directory below the root", r)
		}
		if _, ok := fz.roots[r]; ok || (i > 0 && strings.HasPrefix(r, queue[i-1]+"/")) {
			return fmt.Errorf("%q: frozen twice", r)
		}
	}
	entries, err := fz.freeze(ctx, known, queue, nil)
	if err != nil {
		return err
	}
	n := len(fz.roots)
	for i := range entries {
		if e := &entries[i]; e.Kind == treehash.Dir && slices.Contains(rels, e.Path) {
			fz.roots[e.Path] = e.Ino
		}
	}
	if len(fz.roots) != n+len(rels) {
		return errors.New("a subtree's root is not a directory")
	}
	fz.pre = append(fz.pre, entries...)
	return nil
}

// Finish freezes the rest of the tree, the root last, and returns the stat
// index of the whole tree. A frozen subtree must still be where Subtrees
// found it (the same directory, by inode): else the tree changed while it
// was sealed, an error.
func (fz *Freezer) Finish(ctx context.Context, known map[string]Known) (*StatIndex, error) {
	seen := map[string]bool{}
	entries, err := fz.freeze(ctx, known, []string{""}, seen)
	if err != nil {
		return nil, err
	}
	if len(seen) != len(fz.roots) {
		return nil, errors.New("a frozen subtree is gone: the tree changed while it was sealed")
	}
	rootfd, err := unix.Open(fz.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: fz.root, Err: err}
	}
	defer unix.Close(rootfd)
	if err := unix.Fchmod(rootfd, 0o555); err != nil {
		return nil, &os.PathError{Op: "chmod", Path: fz.root, Err: err}
	}
	entries = append(entries, fz.pre...)
	sortEntries(entries)
	return &StatIndex{Entries: entries}, nil
}

// freeze freezes the directories queue and everything below them but the
// frozen subtrees (each one listed is added to seen; nil: none may be
// listed) and returns their entries.
func (fz *Freezer) freeze(ctx context.Context, known map[string]Known, queue []string, seen map[string]bool) ([]Entry, error) {
	rootfd, err := unix.Open(fz.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: fz.root, Err: err}
	}
	defer unix.Close(rootfd)
	f := &freezer{ctx: ctx, root: fz.root, rootfd: rootfd, known: known, queue: queue, frozen: fz.roots, seen: seen}
	f.cond = sync.NewCond(&f.mu)
	ws := make([]freezeWorker, fz.jobs)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Go(func() { f.work(&ws[i]) })
	}
	wg.Wait()
	if f.err != nil {
		return nil, f.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := 0
	for i := range ws {
		n += len(ws[i].entries)
	}
	entries := make([]Entry, 0, n)
	for i := range ws {
		entries = append(entries, ws[i].entries...)
	}
	return entries, nil
}

// freezer is the shared state of Freeze's workers: the directories
// waiting to be frozen and how many are being frozen.
type freezer struct {
	ctx    context.Context
	root   string
	rootfd int
	known  map[string]Known

	frozen map[string]uint64 // subtrees frozen already (Freezer.roots): not entered again
	seen   map[string]bool   // the frozen subtrees listed (under mu)

	mu    sync.Mutex
	cond  *sync.Cond
	queue []string // directories relative to the root ("" is the root)
	busy  int      // directories being frozen
	err   error    // the first error; it stops every worker
}

// freezeWorker is one thread of Freeze.
type freezeWorker struct {
	entries []Entry
	dirents []dirent
	subdirs []string
	buf     []byte // getdents
	path    []byte // a NUL-terminated name for fstatatNoFollow
}

func (f *freezer) work(w *freezeWorker) {
	w.buf = make([]byte, 32<<10)
	w.path = make([]byte, 0, 256)
	for {
		f.mu.Lock()
		for len(f.queue) == 0 && f.busy > 0 && f.err == nil {
			f.cond.Wait()
		}
		if f.err != nil || len(f.queue) == 0 {
			f.mu.Unlock()
			f.cond.Broadcast()
			return
		}
		rel := f.queue[len(f.queue)-1]
		f.queue = f.queue[:len(f.queue)-1]
		f.busy++
		f.mu.Unlock()

		w.subdirs = w.subdirs[:0]
		err := f.ctx.Err()
		if err == nil {
			err = f.freezeDir(w, rel)
		}

		f.mu.Lock()
		f.busy--
		if err != nil && f.err == nil {
			f.err = err
		}
		if err == nil {
			f.queue = append(f.queue, w.subdirs...)
		}
		f.mu.Unlock()
		f.cond.Broadcast()
	}
}

// freezeDir freezes the directory rel (its mode, then its record from
// the descriptor it is listed through: no stat from its parent) and the
// entries in it, and collects its subdirectories in w.subdirs.
func (f *freezer) freezeDir(w *freezeWorker, rel string) error {
	fd := f.rootfd
	var st unix.Stat_t
	if rel != "" {
		var err error
		if fd, err = unix.Openat(f.rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err != nil {
			return &os.PathError{Op: "open", Path: rel, Err: err}
		}
		defer unix.Close(fd)
		if err := unix.Fchmod(fd, 0o555); err != nil {
			return &os.PathError{Op: "chmod", Path: rel, Err: err}
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return &os.PathError{Op: "stat", Path: rel, Err: err}
		}
		w.entries = append(w.entries, entryOf(rel, &st, treehash.Dir))
	}
	var err error
	if w.dirents, err = readDirents(fd, w.buf, w.dirents[:0]); err != nil {
		return &os.PathError{Op: "readdir", Path: relOrDot(rel), Err: err}
	}
	for _, de := range w.dirents {
		name := de.name
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		if !utf8.ValidString(name) {
			return fmt.Errorf("%q: name is not UTF-8", p)
		}
		if de.typ == unix.DT_DIR {
			if err := f.subdir(w, p, de.ino); err != nil {
				return err
			}
			continue
		}
		k, isKnown := f.known[p]
		if de.typ == unix.DT_REG && isKnown {
			if e, ok := k.entry(p, de.ino); ok {
				w.entries = append(w.entries, e)
				continue
			}
		}
		w.path = append(append(w.path[:0], name...), 0)
		if errno := fstatatNoFollow(fd, w.path, &st); errno != 0 {
			return &os.PathError{Op: "lstat", Path: p, Err: errno}
		}
		kind, ok := kindOf(st.Mode)
		if !ok {
			return fmt.Errorf("%q: not a regular file, directory or symlink", p)
		}
		if kind == treehash.Dir { // a file system that does not report types
			if err := f.subdir(w, p, st.Ino); err != nil {
				return err
			}
			continue
		}
		want := uint32(0o444)
		switch {
		case kind == treehash.File && st.Mode&0o111 != 0:
			want = 0o555
		case kind == treehash.Symlink:
			want = st.Mode & 0o7777
		}
		if st.Mode&0o7777 != want {
			if err := unix.Fchmodat(fd, name, want, 0); err != nil {
				return &os.PathError{Op: "chmod", Path: p, Err: err}
			}
			if errno := fstatatNoFollow(fd, w.path, &st); errno != 0 {
				return &os.PathError{Op: "lstat", Path: p, Err: errno}
			}
		}
		e := entryOf(p, &st, kind)
		switch kind {
		case treehash.Symlink:
			t, err := readlinkAt(fd, name)
			if err != nil {
				return &os.PathError{Op: "readlink", Path: p, Err: err}
			}
			e.Size, e.SHA256 = int64(len(t)), sha256.Sum256([]byte(t))
		case treehash.File:
			if isKnown && k.Size == e.Size {
				e.SHA256 = k.SHA256
				break
			}
			sum, size, err := treehash.HashFile(filepath.Join(f.root, filepath.FromSlash(p)))
			if err != nil {
				return err
			}
			if size != e.Size {
				return fmt.Errorf("%q changed while it was sealed", p)
			}
			e.SHA256 = sum
		}
		w.entries = append(w.entries, e)
	}
	return nil
}

// subdir queues the directory p (inode ino) found in a listing, unless it
// is a subtree frozen already: that one is only noted as seen, and must be
// the same directory.
func (f *freezer) subdir(w *freezeWorker, p string, ino uint64) error {
	if want, ok := f.frozen[p]; ok {
		if f.seen == nil || want != ino {
			return fmt.Errorf("%q changed while it was sealed", p)
		}
		f.mu.Lock()
		f.seen[p] = true
		f.mu.Unlock()
		return nil
	}
	w.subdirs = append(w.subdirs, p) // frozen and recorded by whoever lists it
	return nil
}

// dirent is a directory entry's name and type (unix.DT_*; DT_UNKNOWN when
// the file system does not say).
type dirent struct {
	name string
	ino  uint64
	typ  uint8
}

// readDirents lists a freshly opened directory (without "." and "..")
// with getdents64, keeping each entry's type.
func readDirents(fd int, buf []byte, out []dirent) ([]dirent, error) {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			if len(b) < 19 {
				return nil, unix.EIO
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, unix.EIO
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ino := binary.NativeEndian.Uint64(b[0:8]); ino != 0 && string(name) != "." && string(name) != ".." {
				out = append(out, dirent{name: string(name), ino: ino, typ: b[18]})
			}
			b = b[reclen:]
		}
	}
}

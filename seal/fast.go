package seal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

// The fast check (Verify without Deep) is driven by the index, not by a
// directory walk: every indexed entry gets one fstatat(AT_SYMLINK_NOFOLLOW)
// by its path from the env root, split over a few threads, and a directory
// is listed (getdents) only when its own stat changed. A directory's mtime
// and ctime change whenever an entry is created, removed or renamed in it,
// and user space cannot set a ctime, so a directory whose size, mtime, ctime
// and inode are unchanged has the entries it was sealed with: the same
// reliance on ctime as for a file's content (docs/seal.md). The root has no
// record in the index and is always listed.
//
// Paths are resolved from the root, so an intermediate component that was
// replaced by a symlink would be followed; but that component is itself an
// indexed directory, stat'ed without following, and found to be of another
// kind: drift. Entries below a directory that is gone or of another kind
// are reported as removed, as a walk that cannot enter it would.

// statChunk is how many entries a worker takes at a time.
const statChunk = 128

// fastFinding is one entry's outcome in the stat pass.
type fastFinding struct {
	at int // index position; differences are reported in index order
	d  Difference
}

// fastWorker is one thread's share of the stat pass.
type fastWorker struct {
	buf      []byte // NUL-terminated path for the syscall
	found    []fastFinding
	rehash   []int // files whose stat changed at the same size
	list     []int // directories whose stat changed
	relinked int   // symlinks whose target was read again
	errAt    int
	err      error
}

// checkTreeFast compares the tree at dir with ix by stat (see above). The
// first worker to start runs also (the index's check against the seal)
// before taking its share, so that it overlaps the stat pass.
func (r *Report) checkTreeFast(ctx context.Context, dir string, ix *StatIndex, also func() error, opts Options) error {
	rootfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return refusal.Wrap(refusal.EnvDrift, &os.PathError{Op: "open", Path: dir, Err: err}, "%s: cannot walk the env; check it is intact and readable", dir)
	}
	defer unix.Close(rootfd)
	ents := ix.Entries
	workers := statWorkers(opts.Jobs, len(ents))
	ws := make([]fastWorker, workers)
	var (
		next    atomic.Int64
		claimed atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range ws {
		wg.Go(func() {
			if claimed.CompareAndSwap(false, true) {
				_ = also() // its result is read by the caller
			}
			ws[w].run(ctx, rootfd, ents, &next)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var (
		found   []fastFinding
		rehash  []int
		list    []int
		first   error
		firstAt = len(ents)
	)
	for i := range ws {
		w := &ws[i]
		found = append(found, w.found...)
		rehash = append(rehash, w.rehash...)
		list = append(list, w.list...)
		r.Rehashed += w.relinked
		if w.err != nil && w.errAt < firstAt {
			first, firstAt = w.err, w.errAt
		}
	}
	if first != nil {
		return refusal.Wrap(refusal.EnvDrift, first, "%s: cannot walk the env; check it is intact and readable", dir)
	}
	// Below a directory that is gone or of another kind, every entry is
	// removed (its stat may have been taken through a symlink).
	var bad map[string]bool
	for _, f := range found {
		if ents[f.at].Kind == treehash.Dir && (f.d.Change == Removed || f.d.Change == Kind) {
			if bad == nil {
				bad = map[string]bool{}
			}
			bad[ents[f.at].Path] = true
		}
	}
	if bad != nil {
		below := func(p string) bool {
			for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
				if bad[p[:i]] {
					return true
				}
			}
			return false
		}
		found = slices.DeleteFunc(found, func(f fastFinding) bool { return below(ents[f.at].Path) })
		for i := range ents {
			if below(ents[i].Path) {
				found = append(found, fastFinding{at: i, d: Difference{Code: refusal.EnvDrift, Path: ents[i].Path, Change: Removed, Want: kindName(ents[i].Kind)}})
			}
		}
		rehash = slices.DeleteFunc(rehash, func(i int) bool { return below(ents[i].Path) })
		list = slices.DeleteFunc(list, func(i int) bool { return below(ents[i].Path) })
	}
	r.Entries += len(ents)
	for _, f := range found {
		if f.d.Change == Removed {
			r.Entries--
		}
	}
	// Directories whose stat changed, and the root: entries not indexed
	// are added.
	added, err := listAdded(rootfd, ents, list)
	r.Entries += len(added)
	if err != nil {
		return refusal.Wrap(refusal.EnvDrift, err, "%s: cannot walk the env; check it is intact and readable", dir)
	}
	slices.SortFunc(found, func(a, b fastFinding) int { return a.at - b.at })
	for _, f := range found {
		if r.add(f.d, opts.Explain) {
			return nil
		}
	}
	for _, d := range added {
		if r.add(d, opts.Explain) {
			return nil
		}
	}
	if len(r.Differences) > 0 && !opts.Explain {
		return nil
	}
	slices.Sort(rehash)
	return r.rehash(ctx, dir, ix, rehash, nil, opts)
}

// statWorkers is how many threads the stat pass uses: jobs when given,
// else GOMAXPROCS, at most 4 (the kernel's path lookup stops scaling
// before the cores do) and one per chunk.
func statWorkers(jobs, n int) int {
	if jobs < 1 {
		jobs = min(runtime.GOMAXPROCS(0), 4)
	}
	return max(1, min(jobs, (n+statChunk-1)/statChunk))
}

func (w *fastWorker) run(ctx context.Context, rootfd int, ents []Entry, next *atomic.Int64) {
	var st unix.Stat_t
	w.buf = make([]byte, 0, 512)
	for {
		lo := int(next.Add(statChunk)) - statChunk
		if lo >= len(ents) || ctx.Err() != nil {
			return
		}
		for i := lo; i < min(lo+statChunk, len(ents)); i++ {
			e := &ents[i]
			w.buf = append(append(w.buf[:0], e.Path...), 0)
			if errno := fstatatNoFollow(rootfd, w.buf, &st); errno != 0 {
				if errno == unix.ENOENT || errno == unix.ENOTDIR {
					w.add(i, Difference{Code: refusal.EnvDrift, Path: e.Path, Change: Removed, Want: kindName(e.Kind)})
					continue
				}
				if w.err == nil {
					w.err, w.errAt = &os.PathError{Op: "lstat", Path: e.Path, Err: errno}, i
				}
				next.Store(int64(len(ents)))
				return
			}
			w.compare(rootfd, i, e, &st)
		}
	}
}

func (w *fastWorker) add(i int, d Difference) { w.found = append(w.found, fastFinding{at: i, d: d}) }

// compare checks one indexed entry against its stat.
func (w *fastWorker) compare(rootfd, i int, e *Entry, st *unix.Stat_t) {
	kind, ok := kindOf(uint32(st.Mode))
	if !ok || kind != e.Kind {
		got := "special file"
		if ok {
			got = kindName(kind)
		}
		w.add(i, Difference{Code: refusal.EnvDrift, Path: e.Path, Change: Kind, Want: kindName(e.Kind), Got: got})
		return
	}
	if mode := uint32(st.Mode) & 0o7777; mode != e.Mode {
		w.add(i, Difference{Code: refusal.EnvDrift, Path: e.Path, Change: Mode, Want: fmt.Sprintf("%04o", e.Mode), Got: fmt.Sprintf("%04o", mode)})
	}
	size := st.Size
	if kind == treehash.Dir {
		size = 0
	}
	if size == e.Size && st.Mtim.Nano() == e.MtimeNS && st.Ctim.Nano() == e.CtimeNS && st.Ino == e.Ino {
		return
	}
	switch kind {
	case treehash.Dir:
		w.list = append(w.list, i)
	case treehash.File:
		if size != e.Size {
			w.add(i, Difference{Code: refusal.EnvDrift, Path: e.Path, Change: Content, Want: fmt.Sprintf("%d bytes", e.Size), Got: fmt.Sprintf("%d bytes", size)})
			return
		}
		w.rehash = append(w.rehash, i)
	case treehash.Symlink:
		w.relinked++
		t, err := readlinkAt(rootfd, e.Path)
		if err != nil {
			if w.err == nil {
				w.err, w.errAt = &os.PathError{Op: "readlink", Path: e.Path, Err: err}, i
			}
			return
		}
		if sha256.Sum256([]byte(t)) != e.SHA256 {
			w.add(i, Difference{Code: refusal.EnvDrift, Path: e.Path, Change: LinkTarget, Want: "target sha256 " + shortSum(e.SHA256), Got: t})
		}
	}
}

// listAdded lists the root and the directories at index positions dirs
// and returns an "added" difference for every entry the index lacks (in
// path order).
func listAdded(rootfd int, ents []Entry, dirs []int) ([]Difference, error) {
	var (
		added []Difference
		names []string
		buf   = make([]byte, 32<<10)
	)
	list := func(fd int, rel string) error {
		var err error
		if names, err = readNames(fd, buf, names[:0]); err != nil {
			return &os.PathError{Op: "readdir", Path: relOrDot(rel), Err: err}
		}
		for _, name := range names {
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			if _, ok := slices.BinarySearchFunc(ents, p, func(e Entry, p string) int { return strings.Compare(e.Path, p) }); ok && utf8.ValidString(p) {
				continue
			}
			got := "special file"
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return &os.PathError{Op: "lstat", Path: p, Err: err}
			}
			if k, ok := kindOf(st.Mode); ok {
				got = kindName(k)
			}
			added = append(added, Difference{Code: refusal.EnvDrift, Path: p, Change: Added, Got: got})
		}
		return nil
	}
	if err := list(rootfd, ""); err != nil {
		return nil, err
	}
	for _, i := range dirs {
		rel := ents[i].Path
		fd, err := unix.Openat(rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: rel, Err: err}
		}
		err = list(fd, rel)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(added, func(a, b Difference) int { return strings.Compare(a.Path, b.Path) })
	return added, nil
}

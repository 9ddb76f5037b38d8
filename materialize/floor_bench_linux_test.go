package materialize

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/treelist"
)

// BenchmarkTreeWriteFloor measures what writing an env's tree costs the
// kernel, apart from everything else a create does: the files of the
// tree at CRUXPROV_FLOOR_ENV (an env a create made), read into memory
// first, then written the simplest way (mkdirat each directory; openat
// O_CREAT|O_EXCL, one write and close each file, relative to its
// directory's descriptor; no hashing, no stat, no seal) on one locked
// thread, into a directory placed as a create places its staging env
// (mkdirStaging) under CRUXPROV_FLOOR_TMP (default: a temporary directory,
// which is not the store's file system). cpu-ms/op is that thread's
// user+sys time per tree, median-cpu-ms its median and min-cpu-ms its
// least. Any installer of the tree pays at least this much CPU besides
// compiling, so a cold create cannot take less than (compile CPU + this)
// ÷ cores: bench/materialize.sh prints the least against the compile CPU
// as the cold ratio's floor. Each tree is removed once measured, so that
// the next is written as the bench's cold creates are, right after the
// last was removed: among inodes ext4 freed a moment ago, unless
// mkdirStaging finds a fresh group, and into memory just freed (keeping
// the trees instead made tmpfs's floor a third higher, fresh memory
// costing this VM more).
//
//	CRUXPROV_FLOOR_ENV=$HOME/envs/<hex> go test -run '^$' -bench TreeWriteFloor -benchtime 5x ./materialize/
func BenchmarkTreeWriteFloor(b *testing.B) {
	src := os.Getenv("CRUXPROV_FLOOR_ENV")
	if src == "" {
		b.Skip("set CRUXPROV_FLOOR_ENV to an env's directory (bench/materialize.sh does)")
	}
	tmp := os.Getenv("CRUXPROV_FLOOR_TMP")
	if tmp == "" {
		tmp = b.TempDir()
	}
	tree, err := loadTree(src)
	if err != nil {
		b.Fatal(err)
	}
	var cpu []time.Duration
	for b.Loop() {
		dst, err := mkdirStaging(filepath.Join(tmp, "floor"))
		if err != nil {
			b.Fatal(err)
		}
		d, err := tree.write(dst)
		if err != nil {
			b.Fatal(err)
		}
		cpu = append(cpu, d)
		b.StopTimer()
		if err := removeTree(dst); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	var sum time.Duration
	for _, d := range cpu {
		sum += d
	}
	slices.Sort(cpu)
	b.ReportMetric(float64(sum.Microseconds())/1e3/float64(len(cpu)), "cpu-ms/op")
	// This VM's figures have outliers (a tree now and then costs twice
	// the CPU, as fresh memory does here): a floor is the least it took.
	b.ReportMetric(float64(cpu[len(cpu)/2].Microseconds())/1e3, "median-cpu-ms")
	b.ReportMetric(float64(cpu[0].Microseconds())/1e3, "min-cpu-ms")
	b.ReportMetric(float64(tree.files), "files")
	b.ReportMetric(float64(tree.dirs), "dirs")
	b.ReportMetric(float64(tree.bytes), "bytes")
}

// floorTree is a tree held in memory, in the order of a walk (a directory
// before what it holds).
type floorTree struct {
	ents               []floorEnt
	files, dirs, bytes int
}

type floorEnt struct {
	rel  string
	kind fs.FileMode // fs.ModeDir, fs.ModeSymlink or 0
	data []byte      // a file's bytes, a symlink's target
}

func loadTree(root string) (*floorTree, error) {
	t := &floorTree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		e := floorEnt{rel: rel, kind: d.Type() & (fs.ModeDir | fs.ModeSymlink)}
		switch e.kind {
		case fs.ModeDir:
			t.dirs++
		case fs.ModeSymlink:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.data = []byte(l)
		default:
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
			t.files++
			t.bytes += len(e.data)
		}
		t.ents = append(t.ents, e)
		return nil
	})
	return t, err
}

// write writes t into the empty directory dst on one locked thread and
// returns that thread's CPU time for it.
func (t *floorTree) write(dst string) (time.Duration, error) {
	type result struct {
		cpu time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // the thread exits with the goroutine: its rusage is this tree's alone
		c0 := threadCPU()
		err := t.writeOn(dst)
		ch <- result{threadCPU() - c0, err}
	}()
	r := <-ch
	return r.cpu, r.err
}

func (t *floorTree) writeOn(dst string) error {
	root, err := unix.Open(dst, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fds := map[string]int{".": root}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, e := range t.ents {
		at, name := fds[filepath.Dir(e.rel)], filepath.Base(e.rel)
		switch e.kind {
		case fs.ModeDir:
			if err := unix.Mkdirat(at, name, 0o755); err != nil {
				return &os.PathError{Op: "mkdir", Path: e.rel, Err: err}
			}
			fd, err := unix.Openat(at, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return &os.PathError{Op: "open", Path: e.rel, Err: err}
			}
			fds[e.rel] = fd
		case fs.ModeSymlink:
			if err := unix.Symlinkat(string(e.data), at, name); err != nil {
				return &os.PathError{Op: "symlink", Path: e.rel, Err: err}
			}
		default:
			fd, err := unix.Openat(at, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o444)
			if err != nil {
				return &os.PathError{Op: "open", Path: e.rel, Err: err}
			}
			for b := e.data; len(b) > 0; {
				n, err := unix.Write(fd, b)
				if err != nil {
					unix.Close(fd)
					return &os.PathError{Op: "write", Path: e.rel, Err: err}
				}
				b = b[n:]
			}
			if err := unix.Close(fd); err != nil {
				return &os.PathError{Op: "close", Path: e.rel, Err: err}
			}
		}
	}
	return nil
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTreeWriteFloorCopies checks that the floor writes the tree it
// loaded: the same directories, files (modes and bytes) and symlinks.
func TestTreeWriteFloorCopies(t *testing.T) {
	src := t.TempDir()
	for p, data := range map[string]string{"a/b/c.py": "x = 1\n", "a/empty": "", "d/e/f/g.txt": "g", "top": "t"} {
		p = filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o444); err != nil { // as the floor writes them
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "a", "none"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b/c.py", filepath.Join(src, "a", "link")); err != nil {
		t.Fatal(err)
	}
	tree, err := loadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	if tree.files != 4 || tree.dirs != 6 || tree.bytes != 8 {
		t.Fatalf("loaded %d files, %d dirs, %d bytes; want 4, 6, 8", tree.files, tree.dirs, tree.bytes)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := tree.write(dst); err != nil {
		t.Fatal(err)
	}
	want, err := treelist.Of(src)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := treelist.Of(dst); err != nil || got != want {
		t.Fatalf("wrote (%v)\n%s\nwant\n%s", err, got, want)
	}
	if l, err := os.Readlink(filepath.Join(dst, "a", "link")); err != nil || l != "b/c.py" {
		t.Fatalf("the symlink's target is %q (%v), want b/c.py", l, err)
	}
	if _, err := tree.write(dst); err == nil {
		t.Fatal("writing over an existing tree succeeded")
	}
}

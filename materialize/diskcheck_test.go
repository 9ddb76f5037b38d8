package materialize

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

// deflatedWheel builds a pure-Python wheel whose members are deflated (as
// real wheels' are, unlike wheeltest's stored ones), so that a few KiB of
// blob can unpack to many MiB.
func deflatedWheel(t *testing.T, name string, members map[string]string) []byte {
	t.Helper()
	di := name + "-1.0.dist-info/"
	all := map[string]string{
		di + "WHEEL":    "Wheel-Version: 1.0\nGenerator: cruxprov-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		di + "METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n",
	}
	for n, d := range members {
		all[n] = d
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	var rec strings.Builder
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(all[n])); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(all[n]))
		fmt.Fprintf(&rec, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(all[n]))
	}
	rec.WriteString(di + "RECORD,,\n")
	w, err := zw.CreateHeader(&zip.FileHeader{Name: di + "RECORD", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(rec.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tmpfsHome mounts a tmpfs of size on a new directory (unmounted at
// cleanup) and opens a store there: a real small disk.
func tmpfsHome(t *testing.T, size string) (*store.Store, string) {
	t.Helper()
	dir := testdir.Tmpfs(t, size)
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	return int64(sfs.Bavail) * sfs.Bsize
}

// listing is every path below dir.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var ps []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ps = append(ps, strings.TrimPrefix(p, dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestCreateRefusesShortDiskBeforeWriting: a resolution that unpacks to
// more than the store's file system has free is refused with the
// free-space refusal before the create writes anything (DESIGN §14), with
// the cache, without it (--no-cache) and with bytecode: the file system
// never loses a byte of free space (it used to fill to 0 before the check
// came, which ran only once every wheel was open while the first ones
// were already being installed), and nothing is left behind.
func TestCreateRefusesShortDiskBeforeWriting(t *testing.T) {
	for _, c := range []struct {
		name             string
		noCache, compile bool
	}{{"cache", false, false}, {"no-cache", true, false}, {"compile", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			st, mnt := tmpfsHome(t, "16m")
			// Three wheels of a few KiB each, every one of which alone
			// unpacks to more than the tmpfs holds (20 × 1 MiB).
			var ws []lockfile.ResolvedWheel
			for i := range 3 {
				name := fmt.Sprintf("fat%d", i)
				ms := map[string]string{name + "/__init__.py": "x = 1\n"}
				for j := range 20 {
					ms[fmt.Sprintf("%s/data/d%02d.txt", name, j)] = strings.Repeat(fmt.Sprintf("line %d of %s\n", j, name), (1<<20)/16)
				}
				ws = append(ws, putWheel(t, st, name+"-1.0-py3-none-any.whl", deflatedWheel(t, name, ms)))
			}
			req := request(t, ws...)
			req.NoCache, req.NoCompile = c.noCache, !c.compile
			// Installing while wheels are still being opened races the
			// check; with real wheels the install wins every time. Hold
			// every wheel but the first at its "wheel" event (the point
			// where its batches are queued) so that a create that
			// installs before it checks loses that race here too.
			var first atomic.Bool
			req.Events = func(e Event) {
				if e.Stage == "wheel" && !first.CompareAndSwap(false, true) {
					time.Sleep(time.Second)
				}
			}
			before, tree := freeBytes(t, mnt), listing(t, st.Home())
			// The lowest free space seen while the create runs.
			low := atomic.Int64{}
			low.Store(before)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				var sfs unix.Statfs_t
				for {
					select {
					case <-stop:
						return
					default:
					}
					if unix.Statfs(mnt, &sfs) == nil {
						if f := int64(sfs.Bavail) * sfs.Bsize; f < low.Load() {
							low.Store(f)
						}
					}
				}
			})
			_, err := Create(context.Background(), st, req)
			close(stop)
			wg.Wait()
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "free but the env needs about") {
				t.Fatalf("want the up-front free-space refusal, got %v", err)
			}
			if l := low.Load(); l != before {
				t.Errorf("free space fell from %d to %d bytes during a create the check refused", before, l)
			}
			if after := freeBytes(t, mnt); after != before {
				t.Errorf("free space %d bytes after the refusal, %d before", after, before)
			}
			// Nothing left but the per-digest lock file of envs/.
			var left []string
			for _, p := range listing(t, st.Home()) {
				if !slices.Contains(tree, p) && !(strings.HasPrefix(p, "/envs/.") && strings.HasSuffix(p, ".lock")) {
					left = append(left, p)
				}
			}
			if len(left) > 0 {
				t.Errorf("the refused create left %v", left)
			}
		})
	}
}

// TestCreateDiskCheckCountsTheCache: the unpacked-cache entries a create
// writes are part of what it needs. A wheel that fits the store's file
// system once but not twice is refused with the cache and installed
// without it.
func TestCreateDiskCheckCountsTheCache(t *testing.T) {
	st, mnt := tmpfsHome(t, "16m")
	ms := map[string]string{"mid/__init__.py": ""}
	for j := range 10 {
		ms[fmt.Sprintf("mid/d%02d.txt", j)] = strings.Repeat(fmt.Sprintf("row %d\n", j), (1<<20)/6)
	}
	w := putWheel(t, st, "mid-1.0-py3-none-any.whl", deflatedWheel(t, "mid", ms))
	req := request(t, w)
	before := freeBytes(t, mnt)
	_, err := Create(context.Background(), st, req)
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "free but the env needs about") {
		t.Fatalf("with the cache: want the up-front free-space refusal, got %v", err)
	}
	if after := freeBytes(t, mnt); after != before {
		t.Errorf("free space %d bytes after the refusal, %d before", after, before)
	}
	req.NoCache = true
	r, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatalf("without the cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "lib")); err != nil {
		t.Error(err)
	}
}

// TestCreateDiskCheckLeavesBombsToTheWheel: a wheel whose central
// directory declares more than the disk holds because it is a
// decompression bomb is refused as an invalid wheel, not for its sizes.
func TestCreateDiskCheckLeavesBombsToTheWheel(t *testing.T) {
	st, _ := tmpfsHome(t, "16m")
	w := putWheel(t, st, "boom-1.0-py3-none-any.whl", deflatedWheel(t, "boom", map[string]string{"boom/zeros.bin": strings.Repeat("\x00", 32<<20)}))
	_, err := Create(context.Background(), st, request(t, w))
	if !errors.Is(err, refusal.WheelInvalid) || !strings.Contains(err.Error(), "bomb") {
		t.Fatalf("want the wheel's bomb refusal, got %v", err)
	}
}

// TestTreeChecksItsOwnDisk: an image's tree (Tree) is built under its
// output directory, which may be another file system than the store's:
// the free-space check weighs that one. With the store roomy and the
// output on a small tmpfs, the build is refused up front, saying where,
// without the store's gc remedy (it frees nothing there); it used to
// weigh the store and run out of space half-way.
func TestTreeChecksItsOwnDisk(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	out := testdir.Tmpfs(t, "8m")
	ms := map[string]string{"fat/__init__.py": "x = 1\n"}
	for j := range 20 {
		ms[fmt.Sprintf("fat/data/d%02d.txt", j)] = strings.Repeat(fmt.Sprintf("line %d\n", j), (1<<20)/8)
	}
	req := request(t, putWheel(t, st, "fat-1.0-py3-none-any.whl", deflatedWheel(t, "fat", ms)))
	req.NoCompile = true
	before := freeBytes(t, out)
	_, err = Tree(context.Background(), st, req, filepath.Join(out, "tree"), "/opt/env")
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "the file system of "+out) || !strings.Contains(err.Error(), "free but the tree needs about") || refusal.RemedyOf(err) != nil {
		t.Fatalf("want the up-front refusal naming the output's file system, got %v (remedy %v)", err, refusal.RemedyOf(err))
	}
	if after := freeBytes(t, out); after != before {
		t.Errorf("free space %d bytes after the refusal, %d before", after, before)
	}
}

// An image's tree written to another file system than the store's (CI's
// output on a tmpfs, the store in a home on disk) still fills the store's
// caches: their entries are written in the store and renamed into place
// there, never renamed across file systems (which fails, and used to leave
// every later build to inflate and compile everything again).
func TestTreeOnAnotherFileSystemFillsTheCaches(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	out := testdir.Tmpfs(t, "64m")
	w := putWheel(t, st, "cached-1.0-py3-none-any.whl", deflatedWheel(t, "cached", map[string]string{
		"cached/__init__.py": "x = 1\n",
		"cached/mod.py":      "def f():\n    return 2\n",
	}))
	req := request(t, w)
	req.NoCompile = false
	res, err := Tree(context.Background(), st, req, filepath.Join(out, "tree"), "/opt/env")
	if err != nil {
		t.Fatal(err)
	}
	// The tree is built here for /opt/env: its seal says where it runs.
	if res.Seal.Env.Location != "/opt/env" || res.Seal.Format != seal.Format {
		t.Errorf("the tree's seal: format %s, env.location %q, want %s and /opt/env", res.Seal.Format, res.Seal.Env.Location, seal.Format)
	}
	if _, err := os.Stat(filepath.Join(st.Home(), filepath.FromSlash(UnpackedCacheDir), w.SHA256.Hex())); err != nil {
		t.Errorf("the unpacked-wheel cache has no entry for the wheel: %v", err)
	}
	var packs []string
	_ = filepath.WalkDir(filepath.Join(st.Home(), filepath.FromSlash(PycCacheDir)), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			packs = append(packs, p)
		}
		return nil
	})
	if len(packs) == 0 {
		t.Error("the pyc cache has no pack after a tree compiled two sources")
	}
	if left, _ := os.ReadDir(out); len(left) != 1 {
		t.Errorf("the output directory holds %d entries, want the tree alone", len(left))
	}
	if left, _ := st.CleanStaging(context.Background()); len(left) != 0 {
		t.Errorf("the store's staging holds debris: %v", left)
	}
}

// The other way round: a store too full for the cache entries an image's
// tree will write there is refused before anything is written, naming the
// store, as an env's create is.
func TestTreeChecksTheStoresDiskForItsCaches(t *testing.T) {
	home := testdir.Tmpfs(t, "8m")
	st, err := store.Open(filepath.Join(home, "home"))
	if err != nil {
		t.Fatal(err)
	}
	ms := map[string]string{"fat/__init__.py": "x = 1\n"}
	for j := range 20 {
		ms[fmt.Sprintf("fat/data/d%02d.txt", j)] = strings.Repeat(fmt.Sprintf("line %d\n", j), (1<<20)/8)
	}
	req := request(t, putWheel(t, st, "fat-1.0-py3-none-any.whl", deflatedWheel(t, "fat", ms)))
	req.NoCompile = true
	out := t.TempDir()
	before := freeBytes(t, home)
	_, err = Tree(context.Background(), st, req, filepath.Join(out, "tree"), "/opt/env")
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "the file system of the store") || refusal.RemedyOf(err) == nil {
		t.Fatalf("want the up-front refusal naming the store's file system, got %v (remedy %v)", err, refusal.RemedyOf(err))
	}
	if after := freeBytes(t, home); after != before {
		t.Errorf("free space %d bytes after the refusal, %d before", after, before)
	}
	if _, err := os.Lstat(filepath.Join(out, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the output's tree is left after the refusal: %v", err)
	}
	// --no-cache writes nothing in the store: the tree fits its own disk.
	req.NoCache = true
	if _, err := Tree(context.Background(), st, req, filepath.Join(out, "tree"), "/opt/env"); err != nil {
		t.Fatal(err)
	}
}

func freeInodes(t *testing.T, dir string) uint64 {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	return sfs.Ffree
}

// manyFilesWheel is a wheel of n small modules in one package.
func manyFilesWheel(t *testing.T, st *store.Store, name string, n int) lockfile.ResolvedWheel {
	t.Helper()
	ms := map[string]string{name + "/__init__.py": ""}
	for j := range n {
		ms[fmt.Sprintf("%s/sub%d/m%03d.py", name, j%8, j)] = fmt.Sprintf("x = %d\n", j)
	}
	return putWheel(t, st, name+"-1.0-py3-none-any.whl", deflatedWheel(t, name, ms))
}

// TestCreateRefusesTooFewInodesBeforeWriting: a file system with blocks to
// spare but fewer free inodes than the env has files and directories (a
// store on a volume of many small files) is refused up front, saying so,
// and loses no inode; before, the check weighed bytes alone, the install
// ran out of inodes half-way and the refusal said the disk had run out of
// space with 60 MiB free.
func TestCreateRefusesTooFewInodesBeforeWriting(t *testing.T) {
	for _, compile := range []bool{false, true} {
		t.Run(fmt.Sprintf("compile=%v", compile), func(t *testing.T) {
			st, mnt := tmpfsHome(t, "64m,nr_inodes=400")
			w := manyFilesWheel(t, st, "many", 600)
			req := request(t, w)
			req.NoCompile = !compile
			before, tree := freeInodes(t, mnt), listing(t, st.Home())
			if before < 100 {
				t.Fatalf("only %d inodes left for the test", before)
			}
			_, err := Create(context.Background(), st, req)
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "inodes free but the env makes about") {
				t.Fatalf("want the up-front inode refusal, got %v", err)
			}
			if refusal.RemedyOf(err) == nil {
				t.Error("the refusal has no remedy (gc)")
			}
			var left []string
			for _, p := range listing(t, st.Home()) {
				if !slices.Contains(tree, p) && !(strings.HasPrefix(p, "/envs/.") && strings.HasSuffix(p, ".lock")) {
					left = append(left, p)
				}
			}
			if len(left) > 0 {
				t.Errorf("the refused create left %v", left)
			}
			if after := freeInodes(t, mnt); after+1 < before { // the env's lock file
				t.Errorf("%d inodes free after the refusal, %d before", after, before)
			}
		})
	}
}

// TestCreateOutOfInodesMidway: inodes another process takes while the
// create installs (after the check passed) end it with a refusal that
// says inodes ran out, not space (blocks are left), and no staging stays
// accepted as an env.
func TestCreateOutOfInodesMidway(t *testing.T) {
	st, mnt := tmpfsHome(t, "64m,nr_inodes=2000")
	w := manyFilesWheel(t, st, "many", 300)
	req := request(t, w)
	var once sync.Once
	req.Events = func(e Event) {
		if e.Stage == "wheel" { // past the check: the wheel's batches are queued
			once.Do(func() { fillInodes(t, mnt) })
		}
	}
	r, err := Create(context.Background(), st, req)
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "ran out of inodes") || !strings.Contains(err.Error(), "but no inode") {
		t.Fatalf("want the out-of-inodes refusal, got %v (result %+v)", err, r)
	}
	envs, _ := filepath.Glob(filepath.Join(st.Home(), "envs", "*.seal.json"))
	if len(envs) > 0 {
		t.Errorf("a seal was written: %v", envs)
	}
}

// TestInodeCheckCountsTheVenv: the up-front inode check counts what a
// create writes beside the wheels' members (the staging directory, the
// venv's own directories, links and scripts, the seal and stat index, the
// bytecode cache's packs), so a file system with one inode fewer than the
// create takes refuses it up front. Walking store.md as cruxprov-rootless
// on a tmpfs of 60 inodes, env create of acme-echo passed the check and
// ran out of inodes half-way: the estimate left out ~25 of a small env's
// ~60 inodes. With --no-cache the bytecode it compiles into the env was
// not counted either.
func TestInodeCheckCountsTheVenv(t *testing.T) {
	for _, c := range []struct {
		name             string
		compile, noCache bool
	}{{"no-compile", false, false}, {"compile", true, false}, {"compile,no-cache", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			setup := func() (*store.Store, string, Request) {
				st, mnt := tmpfsHome(t, "64m,nr_inodes=4000")
				req := request(t, manyFilesWheel(t, st, "few", 6))
				req.NoCompile, req.NoCache = !c.compile, c.noCache
				return st, mnt, req
			}
			// What the create takes, on a roomy file system.
			st, mnt, req := setup()
			before := freeInodes(t, mnt)
			if _, err := Create(context.Background(), st, req); err != nil {
				t.Fatal(err)
			}
			used := before - freeInodes(t, mnt)
			// One inode fewer: refused up front, not half-way.
			st, mnt, req = setup()
			fill := filepath.Join(mnt, "filler")
			if err := os.Mkdir(fill, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := 0; freeInodes(t, mnt) > used-1; i++ {
				f, err := os.Create(filepath.Join(fill, fmt.Sprint(i)))
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			_, err := Create(context.Background(), st, req)
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "inodes free but the env makes about") {
				t.Fatalf("the create takes %d inodes; with %d free: want the up-front inode refusal, got %v", used, used-1, err)
			}
		})
	}
}

// TestCreateOutOfInodesWhileSealing: inodes another process takes once
// the install is over (after the check passed, before the seal and stat
// index are written) end the create with the refusal that says inodes ran
// out while blocks remain, and what to do: seal.Commit's ENOSPC was
// reported as "cannot commit the sealed env: … no space left on device",
// with megabytes free.
func TestCreateOutOfInodesWhileSealing(t *testing.T) {
	st, mnt := tmpfsHome(t, "64m,nr_inodes=2000")
	req := request(t, manyFilesWheel(t, st, "few", 20))
	req.NoCompile = true
	var once sync.Once
	req.Events = func(e Event) {
		if e.Stage == "seal" {
			once.Do(func() { fillInodes(t, mnt) })
		}
	}
	r, err := Create(context.Background(), st, req)
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "ran out of inodes") || !strings.Contains(err.Error(), "but no inode") {
		t.Fatalf("want the out-of-inodes refusal, got %v (result %+v)", err, r)
	}
	if refusal.RemedyOf(err) == nil {
		t.Error("the refusal has no remedy (gc)")
	}
	envs, _ := filepath.Glob(filepath.Join(st.Home(), "envs", "*.seal.json"))
	if len(envs) > 0 {
		t.Errorf("a seal was written: %v", envs)
	}
}

// fillInodes creates empty files below mnt until its file system has no
// inode left.
func fillInodes(t *testing.T, mnt string) {
	fill := filepath.Join(mnt, "filler")
	if err := os.Mkdir(fill, 0o755); err != nil {
		t.Error(err)
		return
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(fill, fmt.Sprint(i)))
		if err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Error(err)
			}
			return
		}
		f.Close()
	}
}

// TestShortDiskRefusalNeverSaysNothing: a store with a few KiB free is
// refused saying how many KiB it has, how much the env needs and how much
// more that is; the refusal said "has 0.0 MiB free" (MiB with one decimal,
// rounded down, for anything under 0.1 MiB).
func TestShortDiskRefusalNeverSaysNothing(t *testing.T) {
	st, mnt := tmpfsHome(t, "16m")
	req := request(t, manyFilesWheel(t, st, "few", 6))
	req.NoCompile = true
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, freeBytes(t, mnt)-32<<10)); err != nil {
		t.Fatal(err)
	}
	_, err = Create(context.Background(), st, req)
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "has 32.0 KiB free but the env needs about") ||
		!strings.Contains(err.Error(), " more;") || strings.Contains(err.Error(), " 0.0 ") {
		t.Fatalf("want the free-space refusal in KiB, got %v", err)
	}
}

// TestCreateOutOfSpaceMidwayAdvisesNoCache: space another process takes
// while the create installs (after the check passed) ends it with the
// out-of-space refusal whose remedies, where the create was writing the
// unpacked-wheel cache's new entries, are the create without the caches
// (no_cache) or freeing space (gc, Remedy.Or), as the up-front check's
// are; it advised gc alone. With NoCache, gc alone.
func TestCreateOutOfSpaceMidwayAdvisesNoCache(t *testing.T) {
	for _, noCache := range []bool{false, true} {
		t.Run(fmt.Sprintf("noCache=%v", noCache), func(t *testing.T) {
			st, mnt := tmpfsHome(t, "16m")
			req := request(t, manyFilesWheel(t, st, "many", 300))
			req.NoCache = noCache
			var once sync.Once
			req.Events = func(e Event) {
				if e.Stage == "wheel" { // past the check: the wheel's batches are queued
					once.Do(func() { fillBlocks(t, mnt) })
				}
			}
			r, err := Create(context.Background(), st, req)
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "ran out of space while the env was built") {
				t.Fatalf("want the out-of-space refusal, got %v (result %+v)", err, r)
			}
			rem := refusal.RemedyOf(err)
			switch {
			case rem == nil:
				t.Fatal("no remedy")
			// A store with no sealed env: another store, not gc, frees
			// room (gc --envs lists nothing there).
			case noCache && (rem.Action != refusal.ActionOtherHome || rem.Or != nil):
				t.Errorf("with NoCache: remedy %s (or %+v), want other_home alone", rem.Action, rem.Or)
			case !noCache && (rem.Action != refusal.ActionNoCache || rem.Or == nil || rem.Or.Action != refusal.ActionOtherHome):
				t.Errorf("writing the cache: remedy %s (or %+v), want no_cache or other_home", rem.Action, rem.Or)
			case !noCache && !strings.Contains(err.Error(), "without the store's caches"):
				t.Errorf("writing the cache, the refusal does not say the caches can be left out: %v", err)
			}
		})
	}
}

// fillBlocks writes a file below mnt until its file system has no byte
// left.
func fillBlocks(t *testing.T, mnt string) {
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Error(err)
				return
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
}

// TestShortDiskRefusalFetchedNote: the free-space refusal says that the
// wheels the create fetched are too few to free only when it fetched
// some (it said so of a create that had fetched nothing: every wheel
// already in the store).
func TestShortDiskRefusalFetchedNote(t *testing.T) {
	dir := t.TempDir()
	huge := usage{bytes: 1 << 60, files: 1}
	for _, c := range []struct {
		fetched int
		want    string // "" for none
	}{
		{0, ""},
		{1, "(the wheel this create fetched, which nothing names yet, is too little to free and is fetched again)"},
		{3, "(the 3 wheels this create fetched, which nothing names yet, are too few to free and are fetched again)"},
	} {
		err := checkDisks(dir, dir, dir, diskNeed{tree: huge}, false, c.fetched)
		if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "free but the env needs about") {
			t.Fatalf("fetched %d: want the free-space refusal, got %v", c.fetched, err)
		}
		switch msg := err.Error(); {
		case c.want == "" && strings.Contains(msg, "this create fetched"):
			t.Errorf("fetched nothing, but the refusal says it did: %s", msg)
		case c.want != "" && !strings.Contains(msg, c.want):
			t.Errorf("fetched %d: the refusal does not say %q: %s", c.fetched, c.want, msg)
		}
	}
}

// TestCreateOutOfSpaceWritingBytecodeAdvisesNoCompile: a create with
// bytecode whose disk fills (once the install is over; with the caches,
// once the first wheel is open), on a real small disk (a tmpfs, root
// only), is refused with the create without bytecode
// among its remedies, after freeing space (and, writing the caches, the
// create without them): it advised those alone, though the env without
// its pycs may fit. Where the fill lands (the last pycs, or the seal and
// stat index if the compile was done first, as on a loaded machine) does
// not change the advice: the env without bytecode is smaller either way.
// A create without bytecode is not advised so.
func TestCreateOutOfSpaceWritingBytecodeAdvisesNoCompile(t *testing.T) {
	for _, noCache := range []bool{true, false} {
		t.Run(fmt.Sprintf("noCache=%v", noCache), func(t *testing.T) {
			st, mnt := tmpfsHome(t, "16m")
			req := request(t, manyFilesWheel(t, st, "many", 1500))
			req.NoCompile, req.NoCache = false, noCache
			// Without the caches the disk fills once the install is over:
			// the last pycs, or the seal and stat index where the compile
			// was done first (a loaded machine), advised alike. With them,
			// once the first wheel is open, so that the caches' entries are
			// still being written wherever it strikes (once the install
			// and bytecode are over they are not, and no_cache is not
			// advised then).
			stage := "compile"
			if !noCache {
				stage = "wheel"
			}
			var once sync.Once
			req.Events = func(e Event) {
				if e.Stage == stage {
					once.Do(func() { fillBlocks(t, mnt) })
				}
			}
			r, err := Create(context.Background(), st, req)
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "ran out of space while the env was built") {
				t.Fatalf("want the out-of-space refusal, got %v (result %+v)", err, r)
			}
			if !strings.Contains(err.Error(), "without bytecode") {
				t.Errorf("the refusal does not say the env without bytecode takes less room: %v", err)
			}
			var got []refusal.Action
			for rem := refusal.RemedyOf(err); rem != nil; rem = rem.Or {
				got = append(got, rem.Action)
			}
			// other_home, not gc: the store holds no sealed env.
			want := []refusal.Action{refusal.ActionOtherHome, refusal.ActionNoBytecode}
			if !noCache {
				want = []refusal.Action{refusal.ActionNoCache, refusal.ActionOtherHome, refusal.ActionNoBytecode}
			}
			if !slices.Equal(got, want) {
				t.Errorf("remedies %v, want %v", got, want)
			}
		})
	}
	t.Run("members", func(t *testing.T) {
		st, mnt := tmpfsHome(t, "16m")
		req := request(t, manyFilesWheel(t, st, "many", 300))
		req.NoCompile, req.NoCache = true, true
		var once sync.Once
		req.Events = func(e Event) {
			if e.Stage == "wheel" {
				once.Do(func() { fillBlocks(t, mnt) })
			}
		}
		_, err := Create(context.Background(), st, req)
		if !errors.Is(err, refusal.MaterializeFailed) || strings.Contains(err.Error(), "without bytecode") {
			t.Fatalf("want the out-of-space refusal without the bytecode advice: %v", err)
		}
		for rem := refusal.RemedyOf(err); rem != nil; rem = rem.Or {
			if rem.Action == refusal.ActionNoBytecode {
				t.Errorf("a disk filled by the members advises %s", rem.Action)
			}
		}
	})
}

// TestShortDiskRefusalSaysWhatHoldsIt: the short-disk refusal of a store
// blames its sealed envs only where it has some: on a fresh store it said
// "the sealed envs no accepted pin or open change-set names are what hold
// it", and its advice (gc --envs --dry-run) listed none.
func TestShortDiskRefusalSaysWhatHoldsIt(t *testing.T) {
	home := t.TempDir()
	huge := usage{bytes: 1 << 60, files: 1}
	err := checkDisks(home, home, home, diskNeed{tree: huge}, false, 0)
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "the store holds no sealed env, so other files on its file system hold it") ||
		strings.Contains(err.Error(), "the sealed envs") {
		t.Errorf("a store with no env: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, store.EnvsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seal.SealPath(filepath.Join(home, store.EnvsDir, "ab")), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = checkDisks(home, home, home, diskNeed{tree: huge}, false, 0)
	if !strings.Contains(err.Error(), "the sealed envs no accepted pin or open change-set names are what hold it") {
		t.Errorf("a store with an env: %v", err)
	}
}

package materialize

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/bytesize"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// sizeWheels opens the blob of every wheel of pkgs (checked against the
// resolution: store.OpenVerified), the biggest first, on jobs goroutines,
// and reads its zip central directory, and nothing else, for what
// installing it writes: every member in whole blocks of bs, plus 256
// bytes for its inode and entry, and, unless noCache, the unpacked-cache
// entry it will write when it has none of the right size yet (its members
// but RECORD, as slotOf lays them out), counted apart (it is written in
// the store, the tree where it is staged). Nothing is written and no member
// is read: this is what the free-space check (checkDisks) weighs before the
// create writes its first byte, at the price of one more read of the
// central directories (wheel.OpenReader reads them again, while the first
// wheels are installed: installWheels). Files and directories are counted
// too, for file systems whose inodes run out before their blocks. It
// returns the blobs (as opened wheels with neither wheel nor cache slot,
// in pkgs's order; the caller closes them, also on error), the order to
// install them in, and the need of the tree and of the cache entries.
func sizeWheels(ctx context.Context, st *store.Store, pkgs []lockfile.ResolvedWheel, noCache bool, bs int64, jobs int) ([]opened, []int, diskNeed, error) {
	ws := make([]opened, len(pkgs))
	needs := make([]diskNeed, len(pkgs))
	order := make([]int, len(pkgs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpInt64(pkgs[b].Size, pkgs[a].Size) })
	bs = max(bs, 512)
	const most = 1 << 50 // a member's or an entry's size as counted: no sum overflows
	err := parallel(ctx, len(pkgs), jobs, func(k int) error {
		i := order[k]
		p := pkgs[i]
		f, size, err := st.OpenVerified(p.SHA256, p.Filename)
		if err != nil {
			return err
		}
		ws[i] = opened{f: f, size: size}
		zr, err := zip.NewReader(f, size)
		if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // wheel.OpenReader checks names
			if _, werr := wheel.OpenReader(f, size, p.Filename); werr != nil {
				return werr // its refusal
			}
			return refusal.Wrap(refusal.WheelInvalid, err, "%s is not a readable zip archive; fetch it again", p.Filename)
		}
		var n diskNeed
		var entry int64           // the unpacked-cache entry's size
		dirs := map[string]bool{} // each directory made: whether a module is in it
		addDirs := func(d string) {
			for ; d != "." && d != "/"; d = path.Dir(d) {
				if _, ok := dirs[d]; ok {
					return
				}
				dirs[d] = false
			}
		}
		for _, zf := range zr.File {
			if strings.HasSuffix(zf.Name, "/") {
				addDirs(strings.TrimSuffix(zf.Name, "/"))
				continue // a directory entry: no member
			}
			addDirs(path.Dir(zf.Name))
			u := int64(min(zf.UncompressedSize64, most))
			n.tree.bytes += (u+bs-1)/bs*bs + 256
			n.tree.files++
			if strings.HasSuffix(zf.Name, ".py") {
				n.tree.modules++
				dirs[path.Dir(zf.Name)] = true
			}
			if !(strings.Count(zf.Name, "/") == 1 && strings.HasSuffix(zf.Name, ".dist-info/RECORD")) {
				entry += u
			}
		}
		for _, py := range dirs {
			n.tree.files++
			if py {
				n.tree.modules++ // its __pycache__
			}
		}
		if !noCache {
			fi, err := os.Stat(filepath.Join(st.Home(), filepath.FromSlash(UnpackedCacheDir), p.SHA256.Hex()))
			switch {
			case err == nil && fi.Mode().IsRegular() && fi.Size() == entry:
				// there: read, not written
			case err == nil || errors.Is(err, fs.ErrNotExist):
				n.cache = usage{bytes: min(entry, most), files: 1} // written in the store (attachCache)
			default:
				// unreadable: attachCache writes none
			}
		}
		n.tree.bytes = min(n.tree.bytes, most)
		needs[i] = n
		return nil
	})
	var total diskNeed
	for _, n := range needs {
		total.tree = total.tree.plus(n.tree)
		total.cache = total.cache.plus(n.cache)
	}
	return ws, order, total, err
}

// diskNeed is what a create writes, as sizeWheels counts it from the
// wheels' central directories: the tree, and the unpacked-cache entries
// written in the store.
type diskNeed struct{ tree, cache usage }

// usage is bytes in whole blocks and files and directories (inodes), with
// the modules, each of which (and each of whose directories) compiling
// adds a file for.
type usage struct{ bytes, files, modules int64 }

func (a usage) plus(b usage) usage {
	return usage{a.bytes + b.bytes, a.files + b.files, a.modules + b.modules}
}

// outsideStore reports whether dir is outside the store's home: an
// image's tree built elsewhere (Tree), where gc frees nothing.
func outsideStore(home, dir string) bool {
	rel, err := filepath.Rel(home, dir)
	return err != nil || strings.HasPrefix(rel, "..")
}

// installWheels installs the wheels of pkgs, whose blobs ws holds
// (sizeWheels), into ins as a pipeline: openers open each wheel (the
// biggest first: readWheel), attach it its unpacked-cache slot (unless
// noCache: attachCache) and cut its members into batches, which jobs
// workers install as soon as they come, so opening the last wheels
// overlaps installing the first. Then each wheel's scripts, INSTALLER and
// RECORD are written. Each batch's sources (isSource) go to written, when
// set, as soon as they are on disk (the bytecode stage compiles them
// while the install goes on); its error stops the install. The free space
// was checked before (checkDisk): a disk that fills anyway (another
// process wrote to it) is for the caller to report as such (diskFull).
//
// A refusal opening a wheel wins over an error installing another; an
// error cancels the rest.
func installWheels(ctx context.Context, st *store.Store, ins *installer, pkgs []lockfile.ResolvedWheel, ws []opened, order []int, noCache bool, tmpDir string, jobs int, emit func(Event), warn func(string), written func([]pycSource) error) error {
	jobs = max(jobs, 1)
	js := make([]*wheelJob, len(pkgs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []task, 1024)
	var (
		wg      sync.WaitGroup
		openErr error
	)
	wg.Go(func() {
		defer close(batches)
		err := parallel(ctx, len(pkgs), jobs, func(k int) error {
			i := order[k]
			w, err := readWheel(ws[i].f, ws[i].size, pkgs[i])
			if err != nil {
				return err
			}
			ws[i].w = w
			if !noCache {
				if err := attachCache(st.Home(), tmpDir, &ws[i], pkgs[i], warn); err != nil {
					return refusal.Wrap(refusal.MaterializeFailed, err, "cannot write the unpacked-wheel cache").WithRemedy(refusal.ActionNoCache, "")
				}
			}
			j, bs, err := ins.plan(ws[i])
			if err != nil {
				return err
			}
			js[i] = j
			emit(Event{Stage: "wheel", Name: j.owner})
			for _, b := range bs {
				select {
				case batches <- b:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		if err != nil {
			openErr = err
			cancel()
		}
	})
	installErrs := make([]error, jobs)
	for w := range jobs {
		wg.Go(func() {
			var buf []byte
			for b := range batches {
				if installErrs[w] != nil || ctx.Err() != nil {
					continue // drain, so the openers never block
				}
				srcs, err := ins.installBatch(ctx, b, &buf)
				if err == nil && written != nil {
					err = written(srcs)
				}
				if err != nil {
					installErrs[w] = err
					cancel()
				}
			}
		})
	}
	wg.Wait()
	defer ins.closeDirs()
	if openErr != nil && !errors.Is(openErr, context.Canceled) {
		return openErr
	}
	for _, err := range installErrs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := errors.Join(openErr, errors.Join(installErrs...)); err != nil {
		return err
	}
	return parallel(ctx, len(js), jobs, func(i int) error { return ins.finish(js[i]) })
}

// diskFull rewords an install error caused by a full disk as such. The
// free space was checked before the install started (checkDisk), so this
// is a disk another process filled meanwhile, or one the estimate missed.
// Where the create was writing the caches' new entries in the store
// (cache), their room is part of what ran out: its remedy is the create
// without the store's caches (ActionNoCache), with freeing space
// (ActionGC) as the other, as checkDisk's; else freeing space alone.
// Where the create writes bytecode (compile), the create without it is
// one more (ActionNoBytecode, after those): another env, which takes less
// room wherever the space ran out (the members, the bytecode, the seal).
func diskFull(dir, home string, cache, compile bool, err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	var r *refusal.Error
	if errors.As(err, &r) && r.Err != nil {
		// A refusal of its own ("cannot write … in the env"): its words as
		// the cause, not its code a second time.
		err = fmt.Errorf("%s: %w", r.Detail, r.Err)
	}
	var sfs unix.Statfs_t
	space, free, todo := "space", "free space unknown", "free some space"
	if unix.Statfs(dir, &sfs) == nil {
		free = bytesize.Format(int64(sfs.Bavail)*sfs.Bsize) + " free"
		if sfs.Files > 0 && sfs.Ffree == 0 {
			// Blocks left, no inode: a file system of many small files.
			// Freeing space does not help; removing files does.
			space, free, todo = "inodes (df -i)", free+" but no inode", "remove files there (df -i shows the inodes free)"
		}
	}
	if outsideStore(home, dir) {
		return refusal.Wrap(refusal.MaterializeFailed, err, "the file system of %s ran out of %s while the tree was built (%s now, its staging not yet removed); %s or build elsewhere", filepath.Clean(dir), space, free, todo)
	}
	dir = home
	full := refusal.Wrap(refusal.MaterializeFailed, err, "the file system of the store %s ran out of %s while the env was built (%s now, its staging not yet removed); %s and retry%s", filepath.Clean(dir), space, free, todo, envsHold(dir, "it"))
	if !cache {
		full.WithRemedy(freeingRemedy(dir), "")
	} else {
		full.Detail += "; or create it without the store's caches, whose new entries it was writing too: the env without them takes less room (it is the same env)"
		full.WithRemedy(refusal.ActionNoCache, "").OrRemedy(freeingRemedy(dir), "")
	}
	if compile {
		full.Detail += "; or create it without bytecode: the env without it takes less room (another env: bytecode is part of its digest)"
		full.OrRemedy(refusal.ActionNoBytecode, "")
	}
	return full
}

// readWheel opens f, p's blob of size bytes (checked against p's sha256:
// sizeWheels), as a wheel of p. The caller closes f.
func readWheel(f *os.File, size int64, p lockfile.ResolvedWheel) (*wheel.Wheel, error) {
	w, err := wheel.OpenReader(f, size, p.Filename)
	if err != nil {
		return nil, err
	}
	if w.Filename().Name != p.Name {
		return nil, refusal.New(refusal.WheelInvalid, "%s is not a wheel of %s", p.Filename, p.Name)
	}
	return w, nil
}

package materialize

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// openWheels opens every wheel of pkgs, the biggest first, on jobs
// goroutines: its blob checked against the resolution (openWheel) and its
// central directory, RECORD and metadata read; no member is inflated.
// Unless noCache, each also gets its unpacked-cache slot (lookupCache).
// Nothing is written: this is what the free-space check (checkDisk) reads
// before the create writes its first byte. It returns the opened wheels,
// also on error (for the caller to close them), in pkgs's order, and the
// order to install them in.
func openWheels(ctx context.Context, st *store.Store, pkgs []lockfile.ResolvedWheel, noCache bool, jobs int) ([]opened, []int, error) {
	ws := make([]opened, len(pkgs))
	order := make([]int, len(pkgs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpInt64(pkgs[b].Size, pkgs[a].Size) })
	err := parallel(ctx, len(pkgs), jobs, func(k int) error {
		i := order[k]
		o, err := openWheel(st, pkgs[i])
		if err != nil {
			return err
		}
		ws[i] = o
		if !noCache {
			lookupCache(st.Home(), &ws[i], pkgs[i])
		}
		return nil
	})
	return ws, order, err
}

// lookupCache gives an opened wheel its unpacked-cache slot without
// writing anything: the entry to read when it exists with the right size,
// else a slot with neither entry nor temp file, which the install fills
// (attachCache, once the free space is checked: checkDisk counts it). An
// unreadable entry leaves the wheel without a slot (installed from the
// archive, nothing written), as attachCache does.
func lookupCache(home string, o *opened, p lockfile.ResolvedWheel) {
	s := slotOf(o.w, filepath.Join(home, filepath.FromSlash(UnpackedCacheDir), p.SHA256.Hex()))
	f, err := os.Open(s.path)
	if err == nil {
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == s.total {
			s.src = f
			o.cache = s
			return
		}
		f.Close() // the wrong size: attachCache removes it and writes it again
	} else if !errors.Is(err, fs.ErrNotExist) {
		return
	}
	o.cache = s
}

// installWheels installs the opened wheels ws (of pkgs, openWheels) into
// ins as a pipeline: openers attach each wheel a temp file for the
// unpacked-cache entry it will write (attachCache: a slot without an
// entry) and cut its members into batches, in order (the biggest first),
// which jobs workers install as soon as they come, so cutting the last
// wheels overlaps installing the first. Then each wheel's scripts,
// INSTALLER and RECORD are written. Each batch's sources (isSource) go to
// written, when set, as soon as they are on disk (the bytecode stage
// compiles them while the install goes on); its error stops the install.
// The free space was checked before (checkDisk): a disk that fills anyway
// (another process wrote to it) is reported as such (diskFull).
//
// A refusal preparing a wheel wins over an error installing another; an
// error cancels the rest.
func installWheels(ctx context.Context, st *store.Store, ins *installer, pkgs []lockfile.ResolvedWheel, ws []opened, order []int, tmpDir string, jobs int, emit func(Event), written func([]pycSource) error) error {
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
			if c := ws[i].cache; c != nil && c.src == nil {
				if err := attachCache(st.Home(), tmpDir, &ws[i], pkgs[i]); err != nil {
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
			return diskFull(st.Home(), err)
		}
	}
	if err := errors.Join(openErr, errors.Join(installErrs...)); err != nil {
		return err
	}
	return diskFull(st.Home(), parallel(ctx, len(js), jobs, func(i int) error { return ins.finish(js[i]) }))
}

// diskFull rewords an install error caused by a full disk as such. The
// free space was checked before the install started (checkDisk), so this
// is a disk another process filled meanwhile, or one the estimate missed.
func diskFull(dir string, err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	var sfs unix.Statfs_t
	free := "no"
	if unix.Statfs(dir, &sfs) == nil {
		free = fmt.Sprintf("%d MiB", int64(sfs.Bavail)*sfs.Bsize>>20)
	}
	return refusal.Wrap(refusal.MaterializeFailed, err, "the file system of the store %s ran out of space while the env was installed (%s free now, its staging not yet removed); free some space and retry", filepath.Clean(dir), free).WithRemedy(refusal.ActionGC, "")
}

// openWheel opens p's blob, checked against p's sha256 (by its store stamp
// when its stat is unchanged, store.OpenVerified), as a wheel of p.
func openWheel(st *store.Store, p lockfile.ResolvedWheel) (opened, error) {
	f, size, err := st.OpenVerified(p.SHA256, p.Filename)
	if err != nil {
		return opened{}, err
	}
	w, err := wheel.OpenReader(f, size, p.Filename)
	if err != nil {
		f.Close()
		return opened{}, err
	}
	if w.Filename().Name != p.Name {
		f.Close()
		return opened{}, refusal.New(refusal.WheelInvalid, "%s is not a wheel of %s", p.Filename, p.Name)
	}
	return opened{w: w, f: f, size: size}, nil
}

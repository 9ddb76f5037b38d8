package materialize

import (
	"context"
	"errors"
	"fmt"
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

// installWheels installs every wheel of pkgs into ins as a pipeline:
// openers check and open the wheels (the biggest first), attach each its
// unpacked-cache slot (unless noCache) and cut its members into batches,
// which jobs workers install as soon as they come, so opening the last
// wheels overlaps installing the first. Once every wheel is open, the free
// space of tmpDir's file system is checked against what the env needs;
// short of it, the install stops with a refusal. Then each wheel's scripts,
// INSTALLER and RECORD are written. Each batch's sources (isSource) go to
// written, when set, as soon as they are on disk (the bytecode stage
// compiles them while the install goes on); its error stops the install.
// It returns the opened wheels (for the caller to commit their cache
// entries and close them, also on error).
//
// A refusal opening a wheel wins over an error installing another; an
// error cancels the rest.
func installWheels(ctx context.Context, st *store.Store, ins *installer, pkgs []lockfile.ResolvedWheel, noCache, compile bool, tmpDir string, jobs int, emit func(Event), written func([]pycSource) error) ([]opened, error) {
	jobs = max(jobs, 1)
	ws := make([]opened, len(pkgs))
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
		if err == nil {
			err = checkDisk(st.Home(), ws, compile)
		}
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
		return ws, openErr
	}
	for _, err := range installErrs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return ws, diskFull(st.Home(), err)
		}
	}
	if err := errors.Join(openErr, errors.Join(installErrs...)); err != nil {
		return ws, err
	}
	return ws, parallel(ctx, len(js), jobs, func(i int) error { return ins.finish(js[i]) })
}

// diskFull rewords an install error caused by a full disk (which can come
// before the free-space check, since installing starts while wheels are
// still being opened) as that check's refusal.
func diskFull(dir string, err error) error {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
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

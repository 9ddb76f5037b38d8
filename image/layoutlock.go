package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/flock"
)

// LayoutWaitError is a build that ctx ended while it waited for another
// writer of its output layout (Options.Output) to let the layout go:
// nothing was written into it. Err is ctx's error.
type LayoutWaitError struct {
	Dir string
	Err error
}

func (e *LayoutWaitError) Error() string {
	return fmt.Sprintf("interrupted while waiting for another build writing into the layout %s; the layout is as it was", e.Dir)
}

// Unwrap returns ctx's error.
func (e *LayoutWaitError) Unwrap() error { return e.Err }

// lockLayout takes an exclusive flock(2) on the layout directory dir
// itself, made (with its parents) when missing, for one write of the
// layout: two builds into one layout wrote index.json at once, each read
// before the other's write, and one image was lost from it, both builds
// saying ok (containers/image#1028 is skopeo's same race). The lock is on
// the directory, not on a file in it: no file is added to the layout
// (cp -R LAYOUT/. DIR copies none, and CheckOutput, skopeo and umoci see
// the layout as it was), and index.json, replaced by a rename, could hold
// none. Readers take no lock: every file a writer changes is replaced by
// a rename, and no blob is ever removed.
//
// While another writer holds it, waiting is called once (with dir) and
// the lock is polled until ctx ends (a *LayoutWaitError). The directory
// locked is the one dir names once the lock is held: a writer that made
// dir and failed removes it (writeLayout), and a waiter locked on what it
// removed tries again. made reports that this call made the directory and
// that no writer had made it a layout (its oci-layout file) before the
// lock was had: the write that fails removes what it made, and never a
// layout another build wrote into meanwhile. Where flock is not to be had
// (a file system without it, NFS's emulation, which takes an exclusive
// lock only on a file open for writing; a directory this user may write
// but not read), the write goes on unlocked, as every write did before.
func lockLayout(ctx context.Context, dir string, waiting func(string)) (unlock func(), made bool, err error) {
	said := false
	for {
		made = false
		switch err := os.Mkdir(dir, 0o755); {
		case err == nil:
			made = true
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				return nil, false, err
			}
			continue
		case !errors.Is(err, fs.ErrExist):
			return nil, false, err
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			if _, lerr := os.Lstat(dir); lerr == nil {
				// A symlink to nothing: Mkdir finds it there, and open
				// finds nothing, each time.
				return nil, false, &fs.PathError{Op: "open", Path: dir, Err: err}
			}
			continue // removed by the writer that made it
		case errors.Is(err, unix.ENOTDIR):
			if cerr := CheckOutput(dir); cerr != nil {
				return nil, false, cerr
			}
			return nil, false, &fs.PathError{Op: "open", Path: dir, Err: err}
		case errors.Is(err, unix.EACCES):
			return func() {}, made && !hasLayoutFile(dir), nil
		case err != nil:
			return nil, false, &fs.PathError{Op: "open", Path: dir, Err: err}
		}
		held, err := flockWait(ctx, fd, func() {
			if !said && waiting != nil {
				waiting(dir)
			}
			said = true
		})
		if err != nil {
			unix.Close(fd)
			return nil, false, &LayoutWaitError{Dir: dir, Err: err}
		}
		if !held {
			unix.Close(fd)
			return func() {}, made && !hasLayoutFile(dir), nil
		}
		var locked, named unix.Stat_t
		if unix.Fstat(fd, &locked) == nil && unix.Stat(dir, &named) == nil && locked.Dev == named.Dev && locked.Ino == named.Ino {
			return func() { unix.Close(fd) }, made && !hasLayoutFile(dir), nil
		}
		unix.Close(fd) // dir was removed (and maybe made again) while this waited
	}
}

// flockWait takes fd's exclusive flock (flock.Wait), calling blocked
// each time it has to wait: ctx's error when ctx ended the wait, held
// false where the file system takes no flock.
func flockWait(ctx context.Context, fd int, blocked func()) (held bool, err error) {
	switch err := flock.Wait(ctx, fd, unix.LOCK_EX, blocked); {
	case err == nil:
		return true, nil
	case err == ctx.Err():
		return false, err
	}
	return false, nil
}

func hasLayoutFile(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, "oci-layout"))
	return err == nil
}

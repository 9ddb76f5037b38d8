package index

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/flock"
)

// output is where a Build writes: a staging directory beside the index
// directory, put in its place by commit once the index is complete.
type output struct {
	dir     string // as the caller named it, for messages
	target  string // its absolute real path
	staging string
	exists  bool // target is there (empty, or a previous index) and is exchanged
	lock    *os.File
}

// openOutput takes the build lock of dir, removes what killed builds of
// it left, checks that dir may be replaced, and makes the staging
// directory.
func openOutput(ctx context.Context, dir string) (*output, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("index build: %w", err)
	}
	o := &output{dir: dir, target: abs}
	// A link to a directory: the index replaces the directory it names.
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if o.target, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, fmt.Errorf("index build: %s is a link to nothing (%w); give the index directory itself", dir, err)
		}
	}
	parent, base := filepath.Dir(o.target), filepath.Base(o.target)
	if parent == o.target {
		return nil, fmt.Errorf("index build: %s is the root directory; give a directory of its own for the index", dir)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, unwritableParent(dir, parent, fmt.Errorf("index build: %w", err))
	}
	if o.lock, err = lockFile(ctx, filepath.Join(parent, "."+base+".lock")); err != nil {
		return nil, unwritableParent(dir, parent, err)
	}
	fail := func(err error) (*output, error) {
		o.lock.Close()
		return nil, err
	}
	// Holding the lock, every staging directory of this dir is debris.
	debris, _ := filepath.Glob(filepath.Join(parent, "."+base+".build-*"))
	for _, d := range debris {
		_ = os.RemoveAll(d)
	}
	mode := fs.FileMode(0o755)
	switch fi, err := os.Stat(o.target); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fail(fmt.Errorf("index build: %w", err))
	case !fi.IsDir():
		return fail(fmt.Errorf("index build: %s is not a directory; give a new or empty directory for the index", dir))
	default:
		ents, err := os.ReadDir(o.target)
		if err != nil {
			return fail(fmt.Errorf("index build: %w", err))
		}
		for _, e := range ents {
			if !(e.IsDir() && (e.Name() == "files" || e.Name() == "simple")) {
				return fail(fmt.Errorf("index build: %s holds %s, which an index build does not write; give a new or empty directory, or one a previous index build wrote (it is replaced whole)", dir, e.Name()))
			}
		}
		o.exists, mode = true, fi.Mode().Perm()
	}
	for range 10 {
		var r [6]byte
		_, _ = rand.Read(r[:])
		o.staging = filepath.Join(parent, "."+base+".build-"+hex.EncodeToString(r[:]))
		if err = os.Mkdir(o.staging, 0o755); !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fail(unwritableParent(dir, parent, fmt.Errorf("index build: cannot make a staging directory beside %s: %w", dir, err)))
	}
	if o.exists {
		// The new index keeps the permissions the operator gave the old.
		if err := os.Chmod(o.staging, mode); err != nil {
			o.close()
			return nil, fmt.Errorf("index build: %w", err)
		}
	}
	return o, nil
}

// unwritableParent is err, or, when err says that parent cannot be
// written, an error that says why the build writes there and what to do:
// an index is built beside dir and renamed into its place, so a dir this
// user may write is not enough when its parent is not (a mirror under
// /srv, say, made by root and given to the operator).
func unwritableParent(dir, parent string, err error) error {
	if !errors.Is(err, fs.ErrPermission) && !errors.Is(err, unix.EROFS) {
		return err
	}
	return fmt.Errorf("index build: cannot write in %s (%w): the index is built beside %s (a lock and a staging directory) and renamed into its place, so its parent directory must be writable too; give a directory in a place you can write, e.g. ./mirror, or make %s writable for this user", parent, errors.Unwrap(err), dir, parent)
}

// lockFile takes an exclusive flock on path (created if needed), waiting
// for another build of the same index until ctx ends.
func lockFile(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("index build: cannot open the build lock: %w", err)
	}
	switch err := flock.Wait(ctx, int(f.Fd()), unix.LOCK_EX, nil); {
	case err == nil:
		return f, nil
	case err == ctx.Err():
		f.Close()
		return nil, err
	default:
		f.Close()
		return nil, fmt.Errorf("index build: cannot lock %s: %w", path, err)
	}
}

// commit puts the complete index in staging in the target's place: a
// rename when there was none, an atomic exchange with the previous one
// otherwise (which close then removes).
func (o *output) commit() error {
	var err error
	if o.exists {
		err = exchange(o.staging, o.target)
	} else {
		err = renameNoReplace(o.staging, o.target)
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EXDEV):
			return fmt.Errorf("index build: cannot put the new index in place of %s (%w); a mount point cannot be replaced: give a directory inside it", o.dir, err)
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("index build: the file system of %s cannot swap directories atomically (%w); build into a new directory, which needs no swap", o.dir, err)
		case errors.Is(err, unix.EEXIST):
			return fmt.Errorf("index build: %s appeared while the index was built; run it again", o.dir)
		}
		return fmt.Errorf("index build: cannot put the new index in place of %s: %w", o.dir, err)
	}
	return syncDir(filepath.Dir(o.target))
}

// close removes the staging directory (an unfinished index, or the
// previous index after an exchange) and releases the lock.
func (o *output) close() {
	_ = os.RemoveAll(o.staging)
	o.lock.Close()
}

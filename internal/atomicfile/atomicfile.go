// Package atomicfile owns the one way cruxprov replaces a small file
// durably: a temp file beside it (so the rename stays on one file system),
// written, given its mode, synced, renamed over the file, and the
// directory synced, so that after a crash the file holds the old bytes or
// the new ones, never a part; and the one way it makes directories other
// users read (MkdirAll, modes exact whatever the umask). Stdlib only:
// executor-side packages use it.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFile replaces path by data with mode perm, durably (see the
// package doc). On error the temp file is removed and path is untouched.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, so that the entries created, renamed
// or removed in it last.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAll makes dir and its missing parents, each with exactly perm
// whatever the umask (os.MkdirAll masks it): the store and the registry
// are read by other users (executors, DESIGN §14), and an operator's
// umask 077 must not close them. Directories already there keep their
// modes.
func MkdirAll(dir string, perm os.FileMode) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made by another process meanwhile
		}
		return err
	}
	return os.Chmod(dir, perm)
}

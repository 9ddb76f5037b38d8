// Package atomicfile owns the one way cruxprov replaces a small file
// durably: a temp file beside it (so the rename stays on one file system),
// written, given its mode, synced, renamed over the file, and the
// directory synced, so that after a crash the file holds the old bytes or
// the new ones, never a part. Stdlib only: executor-side packages use it.
package atomicfile

import (
	"os"
	"path/filepath"
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

// Package atomicfile owns the one way cruxprov replaces a small file
// durably: a temp file beside it (so the rename stays on one file system),
// written, given its mode, synced, renamed over the file, and the
// directory synced, so that after a crash the file holds the old bytes or
// the new ones, never a part; the one way it writes a file that must not
// replace one (WriteNew: the same temp file, linked to its name, so that
// after a crash the file is whole or missing, and what was there stays);
// and the one way it makes directories other users read (MkdirAll, modes
// exact whatever the umask). Stdlib only: executor-side packages use it.
//
// The temp file of path is named ".tmp-BASE-N" in path's directory (BASE
// path's base name, N decimal digits): hidden, and never path's name or
// its suffix, so that nothing mistakes the temp file of a process killed
// before its rename or link for the file. Temps lists them.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// WriteFile replaces path by data with mode perm, durably (see the
// package doc). On error the temp file is removed and path is untouched.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// writeTemp writes data to a new temp file of path (see the package doc)
// with mode perm, synced, and returns its name; on error it is removed.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return "", err
	}
	err = fill(f, data, perm)
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// WriteNew writes data to path, which must not exist, with mode perm,
// durably, and never over another file: a temp file beside it (see the
// package doc; created exclusively, mode 0600 until it is whole, so that
// a private key's bytes are never readable by others), written, given
// its mode, synced, then linked to path — link(2) fails rather than
// replace, and the error is fs.ErrExist when path exists — the directory
// synced, and the temp name removed. On an error before the link the
// temp file is removed and path is what it was. A process killed before
// the link leaves no path and a temp file; killed after it, path whole
// and the temp file, a second name of it, until its removal — the last
// step, so that a caller run again after a kill at any point before it
// can tell an interrupted write from a finished one (Temps, os.SameFile).
// That removal is not synced: after a power loss the temp name may come
// back, as a second name of path. link(2) rather than
// renameat2(RENAME_NOREPLACE): every file system with hard links has it,
// NFS too. On one without them (vfat, exFAT: a key on a USB stick), whose
// link(2) fails EPERM, path is created exclusively instead (never over a
// file), written, given its mode and synced: whole, or, for a process
// killed while it wrote, cut short.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EOPNOTSUPP) {
		err = writeExcl(path, data, perm)
	}
	if err == nil {
		err = SyncDir(filepath.Dir(path))
	}
	// Gone already, the temp name was removed by another process that
	// found it (Temps): path, linked, is whole.
	if rerr := os.Remove(tmp); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	return err
}

// writeExcl creates path, which must not exist, writes data to it, gives
// it mode perm (0600 until then) and syncs it; on error it is removed.
func writeExcl(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = fill(f, data, perm)
	if err != nil {
		os.Remove(path)
	}
	return err
}

// fill writes data to the new file f, gives it mode perm, syncs it and
// closes it.
func fill(f *os.File, data []byte, perm os.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Temps lists the temp files WriteFile and WriteNew left for path in its
// directory (".tmp-BASE-N"): a process killed before it renamed or
// linked one leaves it, and WriteNew's killed after its link, as a second
// name of path. Only a caller that knows that no other process is
// writing path may remove them. A missing directory has none.
func Temps(path string) ([]string, error) {
	dir, pre := filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-"
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), pre)
		if ok && n != "" && strings.Trim(n, "0123456789") == "" {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
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

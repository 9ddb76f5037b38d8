// Package kernelfs tells a path on a file system of the kernel's own
// (sysfs, procfs, debugfs, securityfs), whose files and directories the
// kernel alone makes: no user, root included, can make a state
// directory, a ledger or a floor there. It owns only that question; what
// to do instead is its callers' to say.
//
// It asks statfs(2) of the file system, not the error of a write there:
// root's access(2) grants W_OK on /sys and /proc, so the write that
// fails comes only at the mkdir or open (and a check that writes
// nothing, receipts scan's, never sees one), and its error, EPERM or
// EACCES on sysfs, ENOENT on procfs, is the error of an immutable
// attribute, of a directory's mode or of a path not there elsewhere.
// statfs follows links, so /proc/self/root/… is the file system it
// leads to, not procfs. File systems of the kernel's that do make
// directories at a user's mkdir (cgroup, tracefs's instances, configfs,
// bpf) are not among them.
package kernelfs

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// Of is the name of the kernel's file system p is on ("sysfs",
// "procfs", …), and at, the path it was judged by: the nearest path of
// p's that is there (p itself, its links followed, else its nearest
// parent: what a mkdir of p would make its first directory in). name is
// "" where that is another file system or cannot be asked (and on
// systems other than Linux, which have none of these).
func Of(p string) (name, at string) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		name, err := fsName(d)
		if err == nil {
			if name == "" {
				return "", ""
			}
			return name, d
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			return "", ""
		}
	}
}

// Error is a path that cannot be made or written because the file
// system it is on is one of the kernel's (Of): a write there refused
// (Err, the file system's error), or one a check that writes nothing
// knows would be (Err nil).
type Error struct {
	// Path is where the file or directory would have been made.
	Path string
	// FS is the file system's name, as Of gives it.
	FS string
	// Err is the file system's refusal of the write, if one was tried.
	Err error
}

func (e *Error) Error() string {
	s := e.Path + " is on " + e.FS + ", a file system of the kernel's, where no user (root neither) can make a file or directory"
	if e.Err != nil {
		return e.Err.Error() + " (" + s + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

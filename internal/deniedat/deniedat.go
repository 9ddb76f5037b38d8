// Package deniedat finds the path that denied this user access to a
// file: the first directory on the way it may not enter, else the file
// itself. A message naming only the file read sent an operator to a
// file whose own mode was fine, under a directory of 0700. And the path
// that stands where a directory must be, which makes a path "not a
// directory" (ENOTDIR).
package deniedat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Path is the path on the way to p (made absolute) that denies this
// user (its effective ids): the first directory above p it may not
// enter (search permission), else p itself; "" when p cannot be made
// absolute.
func Path(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	var above []string
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(above) - 1; i >= 0; i-- {
		if unix.Faccessat(unix.AT_FDCWD, above[i], unix.X_OK, unix.AT_EACCESS) == unix.EACCES {
			return above[i]
		}
	}
	return abs
}

// NotDir is the first path on the way to p (p included, from the root
// down) that is there and is not a directory: what makes an open or a
// mkdir of p fail "not a directory". "" when there is none.
func NotDir(p string) string {
	var chain []string
	for d := filepath.Clean(p); ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		var st unix.Stat_t
		if unix.Stat(chain[i], &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return chain[i]
		}
	}
	return ""
}

// Denial is where this user was denied, and whose that path is: what a
// message needs to send the user to the one who can grant access (or,
// the path being its own, to chmod).
type Denial struct {
	At    string // the path that denied (Path), else the path asked for
	Uid   uint32 // At's owner, where Known
	Known bool   // At could be looked at
}

// Find is the Denial of p: Path(p), else p itself, and its owner.
func Find(p string) Denial {
	d := Denial{At: Path(p)}
	if d.At == "" {
		d.At = p
	}
	d.Uid, d.Known = Owner(d.At)
	return d
}

// FindErr is the Denial of the path err failed on (its *fs.PathError),
// and false when err names no path.
func FindErr(err error) (Denial, bool) {
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path == "" {
		return Denial{}, false
	}
	return Find(pe.Path), true
}

// Own reports whether the denying path is this user's own (its effective
// uid): a mode it set itself, which it can give back (chmod u+rX), where
// another's is that owner's to grant.
func (d Denial) Own() bool { return d.Known && int(d.Uid) == os.Geteuid() }

// OwnerNote is " (its owner: uid N)" to follow the path in a message, or
// "" where the owner could not be looked at.
func (d Denial) OwnerNote() string {
	if !d.Known {
		return ""
	}
	return fmt.Sprintf(" (its owner: uid %d)", d.Uid)
}

// Owner is the uid that owns p, and whether p could be looked at.
func Owner(p string) (uint32, bool) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0, false
	}
	return st.Uid, true
}

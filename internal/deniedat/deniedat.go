// Package deniedat finds the path that denied this user access to a
// file: the first directory on the way it may not enter, else the file
// itself. A message naming only the file read sent an operator to a
// file whose own mode was fine, under a directory of 0700. And the path
// that stands where a directory must be, which makes a path "not a
// directory" (ENOTDIR).
package deniedat

import (
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

// Owner is the uid that owns p, and whether p could be looked at.
func Owner(p string) (uint32, bool) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0, false
	}
	return st.Uid, true
}

//go:build !linux

package index

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the directories a and b. Without renameat2 it takes two
// renames: a reader may briefly find b missing (never a mix of the two),
// and a crash between them leaves the previous index at a's path.
func exchange(a, b string) error {
	tmp := a + ".old"
	if err := os.Rename(b, tmp); err != nil {
		return err
	}
	if err := os.Rename(a, b); err != nil {
		_ = os.Rename(tmp, b)
		return err
	}
	return os.Rename(tmp, a)
}

// renameNoReplace renames from to to unless to exists (the build lock
// keeps other builds away; anything else creating to races it).
func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); !errors.Is(err, fs.ErrNotExist) {
		return unix.EEXIST
	}
	return os.Rename(from, to)
}

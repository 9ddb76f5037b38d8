package seal

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// exchange swaps the directories a and b (renameat2 RENAME_EXCHANGE): a
// reader of either name finds one of the two, never neither. On a file
// system without it (EINVAL, EOPNOTSUPP, ENOSYS), b is renamed aside into
// a (emptied of a's tree) in two renames instead, as before it was used.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return exchangeByRenames(a, b)
	}
	if err != nil {
		return &os.LinkError{Op: "renameat2 exchange", Old: a, New: b, Err: err}
	}
	return nil
}

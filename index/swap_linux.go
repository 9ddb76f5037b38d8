package index

import "golang.org/x/sys/unix"

// exchange swaps the directories a and b in one step (renameat2
// RENAME_EXCHANGE): a reader sees one or the other, never neither.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// renameNoReplace renames from to to unless to exists.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

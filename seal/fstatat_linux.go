package seal

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// fstatatNoFollow is fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW); path
// must end with a NUL byte (no string conversion per call). It is an
// ordinary, blocking-safe system call: a raw one would keep its thread
// running through a GC stop-the-world, so one stat hung on a dead network
// file system would stall an executor that verifies in-process.
func fstatatNoFollow(dirfd int, path []byte, st *unix.Stat_t) unix.Errno {
	p, s := uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st))
	_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), p, s, unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	return e
}

//go:build linux

package materialize

import "golang.org/x/sys/unix"

// fsTopdirFL is FS_TOPDIR_FL (chattr +T): "the top of a directory
// hierarchy" to ext2/3/4's Orlov allocator.
const fsTopdirFL = 0x00020000

// spreadChildren asks ext2/3/4 to place each directory created in dir (the
// staging env) in a block group of its own choosing, as it does for the
// directories of /, instead of beside dir. The env's files then follow
// their directories there. On ext4 without a journal, a new inode is only
// ever taken after a scan of its group's bitmap that skips, one buffer
// lookup each, every inode deleted in the last minute: creating an env
// right where another was just removed (an env rebuilt, debris cleared,
// gc) is quadratic, several seconds for a few thousand files, and a fresh
// group avoids the scan. A hint only: file systems without the flag
// ignore or refuse it, and nothing depends on it.
func spreadChildren(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopdirFL != 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFL))
}

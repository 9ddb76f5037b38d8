//go:build linux && !cruxprov_nospread

package materialize

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsTopdirFL is FS_TOPDIR_FL (chattr +T): "the top of a directory
// hierarchy" to ext2/3/4's Orlov allocator.
const fsTopdirFL = 0x00020000

// On ext4 without a journal, a new inode is only ever taken after a scan
// of its block group's bitmap that skips, one buffer lookup each, every
// inode deleted in the last minute: creating an env right where another
// was just removed (an env rebuilt, debris cleared, gc) is quadratic,
// seconds of kernel time for a few thousand files. mkdirStaging asks for
// a group of the file system's choosing and, when the one it got shows
// such a recent deletion, for another. Hints only: nothing depends on
// them, and other file systems ignore them.

// spreadStaging turns the placement hints on; building with the tag
// cruxprov_nospread leaves them out (spread_other.go), and
// BenchmarkCreateNoCompile measures both (docs/seal.md, "Tricks").
var spreadStaging = true

// mkdirStaging creates the staging env directory path, or, when ext4
// placed it in a block group that is not fresh (inodes freed in the last
// minutes, or in use), a sibling path-<random hex> (at most fifteen more
// tries, each a mkdir and an rmdir); it returns the directory it created.
func mkdirStaging(path string) (string, error) {
	if !spreadStaging {
		return path, os.Mkdir(path, 0o755)
	}
	spreadChildren(filepath.Dir(path))
	ipg := inodesPerGroup(filepath.Dir(path))
	p := path
	for try := 1; ; try++ {
		if err := os.Mkdir(p, 0o755); err != nil {
			return "", err
		}
		var st unix.Stat_t
		// A directory placed by the TOPDIR hint takes the first inode of
		// its group that is free and not freed a moment ago: the group is
		// fresh when that is the group's very first inode, and the next
		// one is free and was not freed in the last minutes either
		// (nextSlotFresh).
		fresh := ipg == 0 || try == 16 || unix.Lstat(p, &st) != nil
		if !fresh && (st.Ino-1)%ipg == 0 {
			var err error
			if fresh, err = nextSlotFresh(p, st.Ino); err != nil {
				return "", err
			}
		}
		if fresh {
			return p, nil
		}
		if err := os.Remove(p); err != nil {
			return "", err
		}
		// A random name: ext4 places a TOPDIR child by a hash of its name,
		// so fixed names (a tree's "env", "env-1", …) would try the same
		// groups in every build, the ones the last builds just freed.
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		p = fmt.Sprintf("%s-%x", path, rnd)
	}
}

// nextSlotFresh reports whether a file created in dir, whose inode is the
// first of its block group, takes the inode after it. The kernel counts an
// inode as freed recently for a minute, and for six while the block of the
// inode table holding it has unwritten changes: a group an env left one to
// six minutes ago passes the first-inode test (its blocks were written),
// then every inode the new env takes dirties a block and turns the freed
// inodes beside it recent again, and the scan grows with each file (seconds
// of kernel time; an env that lands there spans twice the inodes it uses).
// The directory's own inode dirtied the block of the next one: a probe
// file skips that inode exactly when it was freed in those minutes. The
// probe is removed (one recently freed inode costs each later allocation
// one lookup). A probe that cannot be created leaves the group kept; one
// that cannot be removed is an error, since it would be sealed into the env.
func nextSlotFresh(dir string, ino uint64) (bool, error) {
	probe := filepath.Join(dir, ".placement")
	fd, err := unix.Open(probe, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return true, nil
	}
	var st unix.Stat_t
	serr := unix.Fstat(fd, &st)
	_ = unix.Close(fd)
	if err := unix.Unlink(probe); err != nil {
		return false, &os.PathError{Op: "remove", Path: probe, Err: err}
	}
	return serr != nil || st.Ino == ino+1, nil
}

// spreadChildren asks ext2/3/4 to place each directory created in dir in a
// block group of its own choosing (the one with the fewest directories,
// from a hash of the new directory's name), as it does for the directories
// of /, instead of beside dir. The files of the env follow its directory.
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

// inodesPerGroup is the inodes per block group of the ext2/3/4 file system
// holding dir, or 0 when it is not one or the count is not certain. The
// inode count is groups × inodes per group; a group has as many blocks as
// one bitmap block has bits, and statfs's block count is the file
// system's less its metadata (a few percent).
func inodesPerGroup(dir string) uint64 {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil || fs.Type != unix.EXT4_SUPER_MAGIC || fs.Bsize <= 0 || fs.Files == 0 || fs.Blocks == 0 {
		return 0
	}
	per := uint64(fs.Bsize) * 8
	var ipg uint64
	for n := (fs.Blocks + per - 1) / per; n <= (fs.Blocks+fs.Blocks/12+per-1)/per; n++ {
		if fs.Files%n == 0 {
			if ipg != 0 {
				return 0 // two candidates: not certain
			}
			ipg = fs.Files / n
		}
	}
	return ipg
}

package receipts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RoomNeedBytes is what the next run's receipt may take of its ledger's
// file system: an intent and its outcome, each up to MaxRow.
const RoomNeedBytes = 2 * MaxRow

// Room is what the file system of a ledger has left for the next run's
// receipt, against what that receipt needs. A full file system refuses
// every run ledger_write_failed at its intent while the ledger itself is
// sound, so Scan, which reads, cannot tell; Room can.
type Room struct {
	// Path is the ledger; Of is what statfs was asked of: the ledger, or
	// the nearest existing directory above one not made yet.
	Path, Of string
	// FreeBytes is what this process may still write there (f_bavail, or
	// f_bfree for root, which may use the blocks kept back for it);
	// NeedBytes is RoomNeedBytes.
	FreeBytes, NeedBytes uint64
	// CountsInodes is whether the file system counts inodes (f_files > 0:
	// tmpfs, ext4 do; btrfs does not, and never runs out of them).
	CountsInodes bool
	// FreeInodes are the inodes free; NeedInodes those a run makes: the
	// ledger and its missing directories where no run has made it yet,
	// its key locks <path>.inflight where no keyed run has made them (an
	// append to what is there needs none).
	FreeInodes, NeedInodes uint64
}

// Short reports whether the file system cannot take another receipt: less
// room than NeedBytes, or fewer free inodes than NeedInodes.
func (r Room) Short() bool {
	return r.FreeBytes < r.NeedBytes || r.CountsInodes && r.FreeInodes < r.NeedInodes
}

// RoomOf measures the room the file system of the ledger at path has for
// the next run's receipt (statfs), changing nothing. A ledger not made yet
// is measured on the nearest existing directory above it.
func RoomOf(path string) (Room, error) {
	r := Room{Path: path, Of: path, NeedBytes: RoomNeedBytes}
	side := path
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		// The ledger, and each directory above it that is not there.
		r.NeedInodes = 1
		for r.Of = filepath.Dir(path); ; r.Of = filepath.Dir(r.Of) {
			if _, err := os.Stat(r.Of); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(r.Of) == r.Of {
				break
			}
			r.NeedInodes++
		}
	} else if err != nil {
		return r, err
	} else if s, err := filepath.EvalSymlinks(path); err == nil {
		side = s // the key locks are beside the file itself
	}
	if _, err := os.Lstat(side + ".inflight"); errors.Is(err, fs.ErrNotExist) {
		r.NeedInodes++
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.Of, &st); err != nil {
		return r, &fs.PathError{Op: "statfs", Path: r.Of, Err: err}
	}
	blocks := uint64(st.Bavail)
	if os.Geteuid() == 0 {
		blocks = uint64(st.Bfree)
	}
	r.FreeBytes = blocks * uint64(st.Bsize)
	r.CountsInodes = st.Files > 0
	r.FreeInodes = uint64(st.Ffree)
	return r, nil
}

package store

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// UnpackedDir is the unpacked-wheel cache (materialize/ writes and reads
// it): <hex> is the uncompressed members of the blob <hex>, checked
// against the wheel's RECORD whenever read. GC removes the entries of
// blobs it removes.
const UnpackedDir = "cache/unpacked-v1"

// StampsDir holds one stamp per verified blob: the stat (device, inode,
// size, mtime and ctime in ns) the blob had when its bytes were last
// hashed and found equal to its name. Like an env's stat index (DESIGN §7),
// it lets a reader skip rehashing a blob whose stat is unchanged: a blob is
// read-only, so changing its bytes changes its ctime, which no one but the
// kernel sets. A missing or different stamp means hash again.
const StampsDir = "blobs/stamps"

// stampOf is the stamp line of an open file's stat.
func stampOf(fd int) (string, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", 0, errors.New("not a regular file")
	}
	return fmt.Sprintf("v1 %d %d %d %d %d\n", st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano()), st.Size, nil
}

func (s *Store) stampPath(d digest.Digest) string {
	return filepath.Join(s.home, StampsDir, d.Hex())
}

// stamp records that the blob open as f (named d) was verified. Failing to
// record it only costs a rehash next time.
func (s *Store) stamp(d digest.Digest, f *os.File) {
	line, _, err := stampOf(int(f.Fd()))
	if err != nil {
		return
	}
	p := s.stampPath(d)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), tempPrefix+"stamp-*")
	if err != nil {
		return
	}
	_, err = tmp.WriteString(line)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		if os.Rename(tmp.Name(), p) == nil {
			return
		}
	}
	os.Remove(tmp.Name())
}

// OpenVerified opens the blob d for reading after making sure its bytes
// hash to d: by its stamp when the blob's stat is the one recorded when it
// was last hashed, else by hashing it (and then recording a stamp). It
// returns the open file and its size. Refusals: materialize_failed when
// the blob is missing or unreadable (fetch it), hash_mismatch when its
// bytes are not d's (gc, then fetch again).
func (s *Store) OpenVerified(d digest.Digest, name string) (*os.File, int64, error) {
	path := s.Path(d)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, refusal.New(refusal.MaterializeFailed, "%s (%s) is not in the store; run cruxprov fetch first", name, d)
	}
	if err != nil {
		return nil, 0, refusal.Wrap(refusal.MaterializeFailed, err, "cannot open %s from the store", name)
	}
	line, size, err := stampOf(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, 0, refusal.Wrap(refusal.MaterializeFailed, err, "cannot use the store's blob for %s; run cruxprov gc and fetch again", name)
	}
	if b, err := os.ReadFile(s.stampPath(d)); err == nil && string(b) == line {
		return f, size, nil
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, make([]byte, 256<<10))
	if err != nil {
		f.Close()
		return nil, 0, refusal.Wrap(refusal.MaterializeFailed, err, "cannot read %s from the store", name)
	}
	if got := digest.FromBytes(h.Sum(nil)); got != d || n != size {
		f.Close()
		return nil, 0, refusal.New(refusal.HashMismatch, "the store's blob for %s hashes to %s, not %s; run cruxprov gc and fetch again", name, got, d)
	}
	if line2, _, err := stampOf(int(f.Fd())); err == nil && line2 == line {
		s.stamp(d, f) // not when it changed while it was hashed
	}
	return f, size, nil
}

// isHexName reports whether name is a blob's, a stamp's or a cache
// entry's: 64 lowercase hex digits.
func isHexName(name string) bool {
	if len(name) != 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

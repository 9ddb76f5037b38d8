package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/atomicfile"
	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/filekind"
	"github.com/cruxible/cruxprov/internal/verifying"
	"github.com/cruxible/cruxprov/refusal"
)

// UnpackedDir is the unpacked-wheel cache (materialize/ writes and reads
// it): <hex> is the uncompressed members of the blob <hex>, checked
// against the wheel's RECORD whenever read. GC removes the entries of
// blobs it removes.
const UnpackedDir = "cache/unpacked-v1"

// ImageLayersDir holds the env layers image build wrote, by a key of
// everything their bytes depend on (<key>.tar.gz and its <key>.json), so
// that a rebuild with nothing changed neither materializes nor compresses
// again. A cache: gc removes it all, and deleting it is always safe.
const ImageLayersDir = "cache/image-layers-v1"

// ImageBaseDir holds what image build found in a base image (its
// interpreter), one small file per base manifest digest.
const ImageBaseDir = "cache/image-base-v1"

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
	if atomicfile.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	// Flocked like a blob's temp, so that CleanStaging removes the temp
	// of a writer killed before its rename, and only that one.
	tmp, err := createTemp(filepath.Dir(p), "stamp")
	if err != nil {
		return
	}
	_, err = tmp.WriteString(line)
	if err == nil {
		err = tmp.Chmod(0o444) // like the blob: replaced by rename, never written
	}
	if cerr := tmp.Close(); err == nil && cerr == nil {
		if os.Rename(tmp.Name(), p) == nil {
			return
		}
	}
	os.Remove(tmp.Name())
}

// DamagedError reports a blob whose bytes are not those its name says
// (written to in place, or damaged on disk). The store removes such a
// blob (with its stamp and unpacked-cache entry) when it finds it, so the
// wheel can be fetched again. It is not a refusal: a fetch online
// replaces the blob; other callers make it one.
type DamagedError struct {
	// Digest is the blob's name; Got what its bytes hash to ("" when
	// they could not all be read, or it is not a regular file).
	Digest digest.Digest
	Got    string
	// Kind is what stands at Path when it is not a regular file, in
	// filekind's words ("a directory", "a FIFO (named pipe)", "a
	// symbolic link to T"); "" for a regular file.
	Kind string
	// Path is where the blob was.
	Path string
	// RemoveErr is why it could not be removed (nil when it was): a
	// store written by another user, say.
	RemoveErr error
}

func (e *DamagedError) Error() string {
	if e.Got == "" {
		// Not a file at all: say what stands there. It said "(it is not
		// a regular file, not sha256:…)", which named neither what was
		// there nor what was missing.
		kind := e.Kind
		if kind == "" {
			kind = "not a regular file"
		}
		switch {
		case e.RemoveErr == errDryRun:
			return fmt.Sprintf("the store's blob %s is %s, not a file holding the bytes of %s; it was left there (a dry run)", e.Path, kind, e.Digest)
		case e.RemoveErr != nil:
			return fmt.Sprintf("the store's blob %s is %s, not a file holding the bytes of %s, and could not be removed (%v)", e.Path, kind, e.Digest, e.RemoveErr)
		}
		return fmt.Sprintf("the store's blob %s was %s, not a file holding the bytes of %s, and was removed", e.Path, kind, e.Digest)
	}
	switch {
	case e.RemoveErr == errDryRun:
		return fmt.Sprintf("the store's blob %s is damaged (its bytes hash to %s, not %s); it was left there (a dry run)", e.Path, e.Got, e.Digest)
	case e.RemoveErr != nil:
		return fmt.Sprintf("the store's blob %s is damaged (its bytes hash to %s, not %s) and could not be removed: %v", e.Path, e.Got, e.Digest, e.RemoveErr)
	}
	return fmt.Sprintf("the store's blob %s was damaged (its bytes hash to %s, not %s) and was removed", e.Path, e.Got, e.Digest)
}

// Check reports whether the blob d is in the store with the right bytes,
// and its size. A blob whose stat equals its stamp is not read; one whose
// stat changed (or that has no stamp) is hashed again and stamped when
// correct. A blob with other bytes is removed, with its stamp and its
// unpacked-cache entry, and reported as a *DamagedError (present false):
// fetch it again. Other errors (a blob this user cannot read) are
// returned as they are.
func (s *Store) Check(d digest.Digest) (bool, int64, error) {
	if d.IsZero() {
		return false, 0, nil
	}
	f, size, err := s.open(d, true)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	f.Close()
	return true, size, nil
}

// open opens the blob d after making sure of its bytes, as Check says;
// a damaged blob is removed only when remove is set.
func (s *Store) open(d digest.Digest, remove bool) (*os.File, int64, error) {
	path := s.Path(d)
	// Not following a symlink, and not blocking on a FIFO put in the
	// blob's place (os.Open waited for a writer for ever, and every env
	// create, fetch and gc with it): either is not a blob, so damaged.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		kind := "a symbolic link"
		if target, lerr := os.Readlink(path); lerr == nil {
			kind += " to " + target
		}
		return nil, 0, s.damagedKind(d, path, kind, remove)
	}
	if err != nil {
		return nil, 0, err
	}
	line, size, err := stampOf(int(f.Fd()))
	if err != nil {
		kind := "not a regular file"
		if fi, serr := f.Stat(); serr == nil {
			kind = filekind.Of(fi.Mode())
		}
		f.Close()
		return nil, 0, s.damagedKind(d, path, kind, remove)
	}
	if b, err := capped.ReadFile(s.stampPath(d), 4096); err == nil && string(b) == line {
		return f, size, nil
	}
	vr, err := verifying.NewReader(f, verifying.Want{SHA256: d, Size: size})
	if err == nil {
		// Hidden behind a plain Writer, so that CopyBuffer uses this buffer
		// (io.Discard would read in 8 KiB pieces).
		_, err = io.CopyBuffer(struct{ io.Writer }{io.Discard}, vr, make([]byte, 256<<10))
	}
	var mismatch *verifying.Error
	if errors.As(err, &mismatch) {
		got := mismatch.Got.String()
		if got == "" {
			got = fmt.Sprintf("more than %d bytes", size) // grown since its stat
		}
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		f.Close()
		return nil, 0, s.damaged(d, path, got, st.Ino, remove)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("store: read %s: %w", path, err)
	}
	if line2, _, err := stampOf(int(f.Fd())); err == nil && line2 == line {
		s.stamp(d, f) // not when it changed while it was hashed
	}
	return f, size, nil
}

// errDryRun is a DamagedError's RemoveErr when it was not removed because
// the caller said not to (gc's dry run).
var errDryRun = errors.New("not removed (dry run)")

// damagedKind is damaged for a blob that is not a regular file: kind
// says what stands at path.
func (s *Store) damagedKind(d digest.Digest, path, kind string, remove bool) *DamagedError {
	e := s.damaged(d, path, "", 0, remove)
	e.Kind = kind
	return e
}

// damaged removes the damaged blob d at path (only while path still names
// the inode ino that was found bad, when ino is not 0: a concurrent fetch
// may have put the right bytes there meanwhile), its stamp and its
// unpacked-cache entry; or reports it (remove false: gc's dry run).
func (s *Store) damaged(d digest.Digest, path, got string, ino uint64, remove bool) *DamagedError {
	e := &DamagedError{Digest: d, Got: got, Path: path}
	if !remove {
		e.RemoveErr = errDryRun
		return e
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.RemoveErr = err
		}
		return e
	}
	if ino != 0 && st.Ino != ino {
		return e // replaced already
	}
	if err := os.Remove(path); err != nil {
		e.RemoveErr = err
		return e
	}
	os.Remove(s.stampPath(d))
	os.RemoveAll(filepath.Join(s.home, UnpackedDir, d.Hex()))
	return e
}

// OpenVerified opens the blob d for reading after making sure its bytes
// hash to d, as Check does, and returns the open file and its size.
// Refusals (name is the wheel's file name, for the detail):
// materialize_failed when the blob is missing or unreadable, hash_mismatch
// when its bytes are not d's (the blob is removed then); both advise
// fetching it (refusal.ActionFetch).
func (s *Store) OpenVerified(d digest.Digest, name string) (*os.File, int64, error) {
	f, size, err := s.open(d, true)
	if err == nil {
		return f, size, nil
	}
	var de *DamagedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, refusal.New(refusal.MaterializeFailed, "%s (%s) is not in the store %s; fetch it", name, d, s.home).WithRemedy(refusal.ActionFetch, "")
	case errors.As(err, &de) && de.RemoveErr != nil:
		// Fetching again cannot help while it is there (a directory in
		// its place, another user's store): the store's failure, as
		// Write's; before, hash_mismatch advised a rebuild that failed
		// the same way.
		return nil, 0, refusal.Wrap(refusal.MaterializeFailed, err, "the wheel %s: remove it as the store's owner, then fetch it again", name)
	case errors.As(err, &de):
		return nil, 0, refusal.Wrap(refusal.HashMismatch, err, "the wheel %s", name).WithRemedy(refusal.ActionFetch, "")
	}
	return nil, 0, refusal.Wrap(refusal.MaterializeFailed, err, "cannot read %s from the store", name)
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

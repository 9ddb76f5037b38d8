//go:build unix

package treehash

import (
	"context"
	"crypto/sha256"
	"hash"
	"io/fs"
	"os"
	"syscall"
)

// readDir lists the directory at path without following a symlink there.
func readDir(path string) ([]fs.DirEntry, error) {
	fd, err := openNoFollow(path, syscall.O_DIRECTORY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return f.ReadDir(-1)
}

func openNoFollow(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// fileHasher hashes files with one reused buffer and hash state, on raw
// file descriptors so that hashing a small file allocates nothing but the
// path.
type fileHasher struct {
	h   hash.Hash
	buf []byte
	sum [32]byte // Sum's target, kept here so it does not escape per call
}

func newFileHasher() *fileHasher {
	return &fileHasher{h: sha256.New(), buf: make([]byte, 256<<10)}
}

// hash opens path without following a symlink (O_NONBLOCK, so a FIFO that
// replaced a file cannot block), checks on the open descriptor that it is
// a regular file, and hashes it. The size is the number of bytes hashed,
// which must equal the size fstat reported. It stops with ctx's error when
// ctx is cancelled.
func (fh *fileHasher) hash(ctx context.Context, path string) (sum [32]byte, size int64, exec bool, err error) {
	fd, err := openNoFollow(path, 0)
	if err != nil {
		if err == syscall.ELOOP {
			return sum, 0, false, &Error{Path: path, Reason: "became a symlink while walking", Err: ErrChanged}
		}
		return sum, 0, false, &Error{Path: path, Reason: "cannot open", Err: &fs.PathError{Op: "open", Path: path, Err: err}}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return sum, 0, false, &Error{Path: path, Reason: "cannot stat", Err: &fs.PathError{Op: "fstat", Path: path, Err: err}}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return sum, 0, false, &Error{Path: path, Reason: "refusing an entry that is not a regular file", Err: ErrSpecialFile}
	}
	fh.h.Reset()
	for reads := 1; ; reads++ {
		if reads%32 == 0 { // every 8 MiB: a huge file does not delay cancellation
			if err := ctx.Err(); err != nil {
				return sum, 0, false, err
			}
		}
		n, err := syscall.Read(fd, fh.buf)
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return sum, 0, false, &Error{Path: path, Reason: "cannot read", Err: &fs.PathError{Op: "read", Path: path, Err: err}}
		}
		if n == 0 {
			break
		}
		fh.h.Write(fh.buf[:n])
		size += int64(n)
	}
	if size != st.Size {
		return sum, 0, false, &Error{Path: path, Reason: "size changed while hashing", Err: ErrChanged}
	}
	fh.h.Sum(fh.sum[:0])
	sum = fh.sum
	return sum, size, st.Mode&0o111 != 0, nil
}

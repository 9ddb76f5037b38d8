//go:build !unix

package treehash

import (
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"io/fs"
	"os"
)

func readDir(path string) ([]fs.DirEntry, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrChanged}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

type fileHasher struct {
	h   hash.Hash
	buf []byte
	sum [32]byte // Sum's target, kept here so it does not escape per call
}

func newFileHasher() *fileHasher {
	return &fileHasher{h: sha256.New(), buf: make([]byte, 256<<10)}
}

func (fh *fileHasher) hash(ctx context.Context, path string) (sum [32]byte, size int64, exec bool, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return sum, 0, false, &Error{Path: path, Reason: "cannot stat", Err: err}
	}
	if !fi.Mode().IsRegular() {
		return sum, 0, false, &Error{Path: path, Reason: "refusing an entry that is not a regular file", Err: ErrSpecialFile}
	}
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, false, &Error{Path: path, Reason: "cannot open", Err: err}
	}
	defer f.Close()
	if err := ctx.Err(); err != nil {
		return sum, 0, false, err
	}
	fh.h.Reset()
	size, err = io.CopyBuffer(fh.h, f, fh.buf)
	if err != nil {
		return sum, 0, false, &Error{Path: path, Reason: "cannot read", Err: err}
	}
	if size != fi.Size() {
		return sum, 0, false, &Error{Path: path, Reason: "size changed while hashing", Err: ErrChanged}
	}
	fh.h.Sum(fh.sum[:0])
	sum = fh.sum
	return sum, size, fi.Mode()&0o111 != 0, nil
}

// Package capped owns the one way cruxprov reads a small file whole that
// something else may have put there (an image layout's manifests, a
// receipts checkpoint): at most a given size, and only a regular file. A
// larger file is an error, not a read of its first bytes; a FIFO or a
// device at the path is an error too, not a read that blocks until a
// writer comes or never ends. Stdlib only (and internal/filekind, which
// names what is there instead of a regular file).
package capped

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/cruxible/cruxprov/internal/filekind"
)

// ErrNotRegular and ErrTooLarge are what ReadFile and Open refuse (a
// caller tells them from a file it could not read with errors.Is).
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("larger than its bound")
)

// refused is a refusal of path, said in one sentence, that errors.Is
// finds as its kind.
type refused struct {
	msg  string
	kind error
}

func (e *refused) Error() string { return e.msg }
func (e *refused) Unwrap() error { return e.kind }

// ReadFile returns the bytes of the regular file at path (symbolic links
// followed), refusing one larger than max bytes or that is not a regular
// file. It opens without blocking, so a FIFO put at path is refused at
// once.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into a buffer of the file's size (as os.ReadFile does): a
	// registry's history is read whole before every run, and io.ReadAll
	// growing its buffer from 512 bytes allocated twice the size of a
	// 37 MB history each time.
	size := int64(0)
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		size = min(st.Size(), max)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if int64(len(b)) > max {
		return nil, &refused{fmt.Sprintf("%s is larger than %d bytes", path, max), ErrTooLarge}
	}
	return b, nil
}

// Open opens the regular file at path (symbolic links followed) for
// reading, without blocking: a FIFO or a device put at path is refused
// at once, not waited on until a writer comes (os.Open of a FIFO blocks
// in open(2), past SIGTERM). For a file read as a stream, where ReadFile
// would hold it whole.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		// Said by its kind ("a directory"): the mode's letters
		// ("d---------") told an operator nothing of what was there.
		return nil, &refused{fmt.Sprintf("%s is %s", path, filekind.NotRegular(st.Mode())), ErrNotRegular}
	}
	return f, nil
}

package image

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// openRegular opens path for reading without waiting on a FIFO planted
// there (O_NONBLOCK) and refuses anything but a regular file: a layout's
// blob or index.json is read by name, and os.Open of a FIFO blocks until
// a writer comes, which none ever does, so image verify, a build into
// the layout and a run's pull hung for ever (SIGTERM did not end them).
func openRegular(path string) (*os.File, error) {
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
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	return f, nil
}

// readRegular is os.ReadFile through openRegular.
func readRegular(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

package podman

import (
	"io"
	"sync"
	"testing"
	"time"
)

// slowWriter takes its time over each write, as a sink may, and counts
// what it was given.
type slowWriter struct {
	mu sync.Mutex
	n  int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(20 * time.Millisecond)
	w.mu.Lock()
	w.n += len(p)
	w.mu.Unlock()
	return len(p), nil
}

// TestStdioDrainsToTheEnd: drain reads the container's stdout and stderr
// to their end once their writers are gone, however slowly they are
// copied, before it returns: the run's output is read from the sinks
// then. Closing the pipes at once lost what they still held (here 96 KiB
// of each 256 KiB).
func TestStdioDrainsToTheEnd(t *testing.T) {
	const n = 256 << 10
	out, errw := &slowWriter{}, &slowWriter{}
	s, err := newStdio([]byte("request\n"), out, &tailWriter{w: errw})
	if err != nil {
		t.Fatal(err)
	}
	// The child: reads its request, writes both pipes full, then exits
	// (its ends closed), more than a pipe holds left unread.
	child := make(chan []byte, 1)
	go func() {
		req, _ := io.ReadAll(s.child[0])
		var wg sync.WaitGroup
		for _, f := range s.child[1:] {
			wg.Go(func() { _, _ = f.Write(make([]byte, n)) })
		}
		wg.Wait()
		s.started()
		child <- req
	}()
	if req := <-child; string(req) != "request\n" {
		t.Errorf("the child read %q of its stdin", req)
	}
	s.drain()
	out.mu.Lock()
	errw.mu.Lock()
	defer out.mu.Unlock()
	defer errw.mu.Unlock()
	if out.n != n || errw.n != n {
		t.Errorf("drain returned with %d bytes of stdout and %d of stderr read, want %d each", out.n, errw.n, n)
	}
}

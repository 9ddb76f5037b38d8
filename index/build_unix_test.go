//go:build unix

package index

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBuildRefusesFIFO: a FIFO named *.whl, or a link to one, fails the
// build naming it, and is never opened (reading it would wait forever).
func TestBuildRefusesFIFO(t *testing.T) {
	for _, link := range []bool{false, true} {
		from := t.TempDir()
		writeWheel(t, from, "alpha", "1.0", "")
		fifo := filepath.Join(t.TempDir(), "pipe")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Skip("mkfifo:", err)
		}
		bad := filepath.Join(from, "mid-1.0-py3-none-any.whl")
		if link {
			if err := os.Symlink(fifo, bad); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Rename(fifo, bad); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		done := make(chan error, 1)
		go func() {
			_, err := Build(ctx, filepath.Join(t.TempDir(), "mirror"), from)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "named pipe") {
				t.Errorf("link %v: %v, want an error naming the named pipe %s", link, err, bad)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("link %v: Build is still reading the FIFO", link)
		}
		cancel()
	}
}

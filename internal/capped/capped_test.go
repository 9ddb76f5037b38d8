package capped

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("12345"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		max        int64
		want, err  string
	}{
		{"at the cap", small, 5, "12345", ""},
		{"past the cap", small, 4, "", "larger than 4 bytes"},
		{"a directory", dir, 100, "", "is a directory, not a regular file"},
		{"a FIFO no one writes", fifo, 100, "", "is a FIFO (named pipe), not a regular file"}, // and no hang
		{"missing", filepath.Join(dir, "none"), 100, "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadFile(tc.path, tc.max)
			if tc.err == "" {
				if err != nil || string(b) != tc.want {
					t.Fatalf("%q, %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%q, %v; want an error with %q", b, err, tc.err)
			}
		})
	}
}

// TestReadFileAllocatesItsSize: a file read whole is read into a buffer
// of its size. io.ReadAll grew one from 512 bytes, allocating about
// twice the file (a registry's history, read before every run).
func TestReadFileAllocatesItsSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	b, err := ReadFile(p, 1<<30)
	runtime.ReadMemStats(&m1)
	if err != nil || len(b) != 8<<20 {
		t.Fatalf("ReadFile: %d bytes, %v", len(b), err)
	}
	if a := m1.TotalAlloc - m0.TotalAlloc; a > 9<<20 {
		t.Errorf("ReadFile of 8 MiB allocated %d bytes", a)
	}
}

package capped

import (
	"os"
	"path/filepath"
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
		{"a directory", dir, 100, "", "not a regular file"},
		{"a FIFO no one writes", fifo, 100, "", "not a regular file"}, // and no hang
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

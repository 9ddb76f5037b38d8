package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file is replaced with its mode, nothing else is left
// in the directory, and a failed write (a directory in the way) leaves
// what was there and no temp file.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, data := range []string{"one", "two, longer"} {
		if err := WriteFile(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != data {
			t.Fatalf("read %q, %v; want %q", b, err, data)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
			t.Errorf("mode %v", fi.Mode())
		}
	}
	blocked := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(blocked, []byte("x"), 0o644); err == nil {
		t.Fatal("replaced a non-empty directory")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left behind: %v", ents)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("synced a missing directory")
	}
}

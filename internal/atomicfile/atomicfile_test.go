package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
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

// TestMkdirAllIgnoresUmask: what MkdirAll makes has the mode asked for
// under umask 077; what was there keeps its own.
func TestMkdirAllIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	base := t.TempDir()
	os.Chmod(base, 0o700)
	dir := filepath.Join(base, "a", "b")
	if err := MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{base: 0o700, filepath.Join(base, "a"): 0o755, dir: 0o755} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v (%v), want %v", p, fi, err, want)
		}
	}
	f := filepath.Join(base, "f")
	os.WriteFile(f, nil, 0o644)
	if err := MkdirAll(filepath.Join(f, "x"), 0o755); err == nil {
		t.Error("a directory below a file was made")
	}
}

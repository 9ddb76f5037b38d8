package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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

// TestWriteNew: a new file gets its bytes and mode; a path that exists
// (a file, a dangling symlink) is refused fs.ErrExist and keeps what it
// was; no temp file is left either way.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k.key")
	if err := WriteNew(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "one" {
		t.Fatalf("read %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if err := WriteNew(p, []byte("two"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("replaced: %q", b)
	}
	dangling := filepath.Join(dir, "d.pub")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(dangling, []byte("x"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over a dangling symlink: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("wrote through a dangling symlink")
	}
	if tmp, _ := Temps(p); len(tmp) != 0 {
		t.Errorf("left %v", tmp)
	}
}

// TestTemps lists the temp files of one path and no other's: not those of
// a path whose name starts with this one's, not the file itself.
func TestTemps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "alice.key")
	for _, n := range []string{"alice.key", ".tmp-alice.key-123", ".tmp-alice.key-", ".tmp-alice.key-x.key-1", ".tmp-alice.key.key-2", ".tmp-alice.pub-3", ".tmp-alice.key-456"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Temps(p)
	want := []string{filepath.Join(dir, ".tmp-alice.key-123"), filepath.Join(dir, ".tmp-alice.key-456")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Temps: %v %v, want %v", got, err, want)
	}
	if got, err := Temps(filepath.Join(dir, "missing", "k")); err != nil || got != nil {
		t.Errorf("a missing directory: %v %v", got, err)
	}
}

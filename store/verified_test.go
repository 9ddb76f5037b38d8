package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestOpenVerified: a blob is stamped when committed and opened without a
// rehash while its stat is unchanged; any change of its bytes, even one
// that keeps its size and restores its mtime, changes its ctime, so it is
// hashed again and refused.
func TestOpenVerified(t *testing.T) {
	s := open(t)
	d := put(t, s, "wheel bytes")
	stamp := filepath.Join(s.Home(), StampsDir, d.Hex())
	if _, err := os.Stat(stamp); err != nil {
		t.Fatalf("no stamp after commit: %v", err)
	}
	f, size, err := s.OpenVerified(d, "w.whl")
	if err != nil || size != int64(len("wheel bytes")) {
		t.Fatalf("open: %v, %d", err, size)
	}
	f.Close()

	// A wrong stamp means hashing again, which passes and stamps anew.
	good, _ := os.ReadFile(stamp)
	os.Chmod(stamp, 0o644)
	if err := os.WriteFile(stamp, []byte("v1 0 0 0 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, err = s.OpenVerified(d, "w.whl")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(stamp); string(b) != string(good) {
		t.Fatalf("stamp after a rehash: %q, want %q", b, good)
	}

	// Same size, mtime restored: only ctime tells, and it does.
	p := s.Path(d)
	fi, _ := os.Stat(p)
	time.Sleep(10 * time.Millisecond)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("wheel bytez"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o444)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	if _, _, err := s.OpenVerified(d, "w.whl"); !errors.Is(err, refusal.HashMismatch) {
		t.Fatalf("tampered blob: %v", err)
	}

	// Missing: fetch it.
	if _, _, err := s.OpenVerified(digest.Sum([]byte("absent")), "x.whl"); !errors.Is(err, refusal.MaterializeFailed) {
		t.Fatalf("missing blob: %v", err)
	}
}

// TestOpenVerifiedWithoutStamp: a store without stamps (an older
// cruxprov's, or stamps removed) hashes and stamps.
func TestOpenVerifiedWithoutStamp(t *testing.T) {
	s := open(t)
	d := put(t, s, "older store")
	if err := os.RemoveAll(filepath.Join(s.Home(), StampsDir)); err != nil {
		t.Fatal(err)
	}
	f, _, err := s.OpenVerified(d, "w.whl")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(s.Home(), StampsDir, d.Hex())); err != nil {
		t.Fatalf("not stamped after hashing: %v", err)
	}
}

//go:build unix

package treehash

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/digest"
)

func writeFile(t *testing.T, p string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask-proof
		t.Fatal(err)
	}
}

func TestWalkTreeRecords(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a", "b.txt"), []byte("b"), 0o644)
	writeFile(t, filepath.Join(root, "a-b"), []byte("ab"), 0o644)
	writeFile(t, filepath.Join(root, "grp-exec"), nil, 0o610) // only the group execute bit
	if err := os.Symlink("/nonexistent/target", filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "é"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, jobs := range []int{0, 1, 2, 8} {
		t.Run(fmt.Sprintf("jobs=%d", jobs), func(t *testing.T) {
			entries, err := Walk(context.Background(), root, jobs)
			if err != nil {
				t.Fatal(err)
			}
			var recs []string
			for i := range entries {
				recs = append(recs, string(appendRecord(nil, &entries[i])))
			}
			h := func(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }
			want := []string{
				"D- 0 - a\x00",
				"F- 2 " + h("ab") + " a-b\x00",
				"F- 1 " + h("b") + " a/b.txt\x00",
				"L- 19 " + h("/nonexistent/target") + " dangling\x00",
				"L- 1 " + h("a") + " dirlink\x00", // not followed: a/b.txt appears once
				"Fx 0 " + h("") + " grp-exec\x00",
				"D- 0 - é\x00",
			}
			if strings.Join(recs, "|") != strings.Join(want, "|") {
				t.Fatalf("jobs=%d records:\n%q\nwant\n%q", jobs, recs, want)
			}
			d, _, err := Sum(context.Background(), root, jobs)
			if err != nil || d != digest.Sum([]byte(strings.Join(want, ""))) {
				t.Fatalf("Sum = %v, %v", d, err)
			}
		})
	}
}

func TestTreeDigestChanges(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "f"), []byte("x"), 0o644)
	base, _, err := Sum(context.Background(), root, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func() error
		undo   func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(root, "f"), []byte("y"), 0o644) },
			func() error { return os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644) }},
		{"exec bit", func() error { return os.Chmod(filepath.Join(root, "f"), 0o744) },
			func() error { return os.Chmod(filepath.Join(root, "f"), 0o644) }},
		{"empty dir", func() error { return os.Mkdir(filepath.Join(root, "d"), 0o755) },
			func() error { return os.Remove(filepath.Join(root, "d")) }},
		{"symlink", func() error { return os.Symlink("f", filepath.Join(root, "l")) },
			func() error { return os.Remove(filepath.Join(root, "l")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.change(); err != nil {
				t.Fatal(err)
			}
			d, _, err := Sum(context.Background(), root, 2)
			if err != nil || d == base {
				t.Errorf("%s: digest unchanged (%v)", c.name, err)
			}
			if err := c.undo(); err != nil {
				t.Fatal(err)
			}
			if d, _, _ := Sum(context.Background(), root, 2); d != base {
				t.Errorf("%s: undoing did not restore the digest", c.name)
			}
		})
	}
	// Non-execute mode bits and mtimes are not part of the digest.
	if err := os.Chmod(filepath.Join(root, "f"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, _, _ := Sum(context.Background(), root, 2); d != base {
		t.Error("a read-bit change changed the digest")
	}
}

func TestWalkTreeRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, root string) string // returns the root to walk
		path  string
		is    error
	}{
		{"non-UTF-8 name", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "d", "bad\xffname"), nil, 0o644)
			return root
		}, "d/bad\xffname", ErrNonUTF8Name},
		{"FIFO", func(t *testing.T, root string) string {
			if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			return root
		}, "fifo", ErrSpecialFile},
		{"socket", func(t *testing.T, root string) string {
			// Unix socket paths are short; bind relative to the root.
			t.Chdir(root)
			l, err := net.Listen("unix", "sock")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return root
		}, "sock", ErrSpecialFile},
		{"character device", func(t *testing.T, root string) string {
			if err := syscall.Mknod(filepath.Join(root, "null"), syscall.S_IFCHR|0o644, 1<<8|3); err != nil {
				t.Skipf("mknod: %v", err)
			}
			return root
		}, "null", ErrSpecialFile},
		{"root is a symlink", func(t *testing.T, root string) string {
			if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("real", filepath.Join(root, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "link")
		}, "", ErrSpecialFile},
		{"root is a file", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "f"), nil, 0o644)
			return filepath.Join(root, "f")
		}, "", ErrSpecialFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := c.setup(t, t.TempDir())
			_, err := Walk(context.Background(), root, 2)
			var te *Error
			if !errors.As(err, &te) || !errors.Is(err, c.is) {
				t.Fatalf("got %v, want a *Error wrapping %v", err, c.is)
			}
			if c.path != "" && te.Path != c.path {
				t.Fatalf("path %q, want %q", te.Path, c.path)
			}
		})
	}
}

func TestWalkTreeMissingRoot(t *testing.T) {
	_, err := Walk(context.Background(), filepath.Join(t.TempDir(), "nope"), 1)
	var te *Error
	if !errors.As(err, &te) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// TestWalkTreeUnreadable runs the walk as an unprivileged user (root
// ignores modes) over a tree with an unreadable file and directory.
func TestWalkTreeUnreadable(t *testing.T) {
	if os.Getenv("DIGEST_WALK_CHILD") != "" {
		_, err := Walk(context.Background(), os.Args[len(os.Args)-1], 2)
		var te *Error
		if !errors.As(err, &te) || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("got %v, want a *Error wrapping a permission error", err)
		}
		fmt.Println("CHILD-PATH=" + te.Path)
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv")
	}
	for _, c := range []struct{ name, path string }{{"file", "secret"}, {"dir", "locked"}} {
		t.Run(c.name, func(t *testing.T) {
			root, err := os.MkdirTemp("", "digest-walk-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(filepath.Join(root, c.path), 0o755); os.RemoveAll(root) })
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "ok"), []byte("ok"), 0o644)
			if c.name == "file" {
				writeFile(t, filepath.Join(root, c.path), []byte("s"), 0o600)
			} else if err := os.Mkdir(filepath.Join(root, c.path), 0o700); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
				os.Args[0], "-test.run=^TestWalkTreeUnreadable$", "-test.v", root)
			cmd.Env = append(os.Environ(), "DIGEST_WALK_CHILD=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "CHILD-PATH="+c.path+"\n") {
				t.Fatalf("child did not report %s:\n%s", c.path, out)
			}
		})
	}
}

func TestWalkTreeCancelled(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "f"), []byte("x"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Walk(ctx, root, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 1<<20+7) // more than one read buffer
	for i := range big {
		big[i] = byte(i * 7)
	}
	writeFile(t, filepath.Join(dir, "big"), big, 0o644)
	sum, size, err := HashFile(filepath.Join(dir, "big"))
	if err != nil || size != int64(len(big)) || sum != sha256.Sum256(big) {
		t.Fatalf("HashFile = %x, %d, %v", sum, size, err)
	}
	if err := os.Symlink("big", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var te *Error
	if _, _, err := HashFile(filepath.Join(dir, "link")); !errors.As(err, &te) {
		t.Fatalf("HashFile followed a symlink: %v", err)
	}
	if _, _, err := HashFile(dir); !errors.Is(err, ErrSpecialFile) {
		t.Fatalf("HashFile(dir) = %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := HashFile(filepath.Join(dir, "fifo")); !errors.Is(err, ErrSpecialFile) {
		t.Fatalf("HashFile(fifo) = %v", err) // and it did not block
	}
}

// makeBenchTree writes a tree shaped like a Python environment: many small
// files in nested packages plus a few large ones.
// DIGEST_BENCH_ROOT names an existing tree (a real environment, say) to
// benchmark instead.
func makeBenchTree(b *testing.B) (string, int64) {
	b.Helper()
	if root := os.Getenv("DIGEST_BENCH_ROOT"); root != "" {
		entries, err := Walk(context.Background(), root, 2)
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, e := range entries {
			if e.Kind == File {
				total += e.Size
			}
		}
		return root, total
	}
	root := b.TempDir()
	var total int64
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i*31 + i>>8)
	}
	for p := 0; p < 40; p++ {
		for m := 0; m < 50; m++ {
			size := 200 + (p*50+m)*37%12000
			path := filepath.Join(root, fmt.Sprintf("pkg%02d", p), fmt.Sprintf("sub%d", m%5), fmt.Sprintf("mod%02d.py", m))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, buf[m:m+size], 0o644); err != nil {
				b.Fatal(err)
			}
			total += int64(size)
		}
	}
	for i := 0; i < 8; i++ {
		path := filepath.Join(root, "libs", fmt.Sprintf("lib%d.so", i))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, buf[i:], 0o755); err != nil {
			b.Fatal(err)
		}
		total += int64(len(buf) - i)
	}
	return root, total
}

// BenchmarkWalkTree hashes a generated tree of 2000 small files and 8 of
// 4 MiB (about 44 MB); compare with bench/treedigest.sh for find|sha256sum.
func BenchmarkWalkTree(b *testing.B) {
	root, total := makeBenchTree(b)
	for _, jobs := range []int{1, 2} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Walk(context.Background(), root, jobs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFindSha256sum runs the peer the tree walk is compared with,
// find | xargs -P2 sha256sum, over the same generated tree
// (bench/treedigest.sh prints the two side by side).
func BenchmarkFindSha256sum(b *testing.B) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		b.Skip("no sha256sum")
	}
	root, total := makeBenchTree(b)
	b.SetBytes(total)
	for b.Loop() {
		cmd := exec.Command("sh", "-c", "find . -type f -print0 | xargs -0 -P2 sha256sum >/dev/null")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

// BenchmarkHashFile hashes one small file per call, as a verifier rehashing
// the files whose stat changed does.
func BenchmarkHashFile(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := HashFile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// A cancelled context stops the hashing of a large file part way.
func TestHashCancelledLargeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	writeFile(t, p, make([]byte, 9<<20), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := newFileHasher().hash(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

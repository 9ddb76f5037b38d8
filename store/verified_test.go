package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
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

// damage writes 7 bytes into the blob at p in place, as
// `dd conv=notrunc` does (size unchanged), and puts its mtime back: only
// its ctime tells. The sleep lets the coarse kernel clock that stamps
// ctime tick past the stamp's.
func damage(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	os.Chmod(p, 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("DAMAGED"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chmod(p, 0o444)
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(p); fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatal("damage changed the size or the mtime")
	}
}

// TestDamagedBlob: a blob whose bytes were changed in place (size and
// mtime kept) is noticed by every reader of the store, removed with its
// stamp and unpacked-cache entry, and can be stored again.
func TestDamagedBlob(t *testing.T) {
	const body = "wheel bytes, long enough"
	ctx := context.Background()
	tests := []struct {
		name string
		// find runs the reader that must notice the damage; it reports
		// whether the damaged blob is to be gone afterwards.
		find func(t *testing.T, s *Store, d digest.Digest) bool
	}{
		{"Check", func(t *testing.T, s *Store, d digest.Digest) bool {
			ok, _, err := s.Check(d)
			var de *DamagedError
			if ok || !errors.As(err, &de) || de.RemoveErr != nil || de.Digest != d || !strings.Contains(de.Error(), "was removed") {
				t.Fatalf("Check: %v %v", ok, err)
			}
			return true
		}},
		{"OpenVerified", func(t *testing.T, s *Store, d digest.Digest) bool {
			_, _, err := s.OpenVerified(d, "w-1.0-py3-none-any.whl")
			if !errors.Is(err, refusal.HashMismatch) || !strings.Contains(err.Error(), "w-1.0-py3-none-any.whl") || !strings.Contains(err.Error(), "removed") {
				t.Fatalf("OpenVerified: %v", err)
			}
			if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionFetch {
				t.Errorf("remedy %+v, want fetch", r)
			}
			return true
		}},
		{"Put replaces it", func(t *testing.T, s *Store, d digest.Digest) bool {
			if err := s.Put(ctx, d, int64(len(body)), strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
			return false
		}},
		{"GC dry run lists it", func(t *testing.T, s *Store, d digest.Digest) bool {
			rep, err := s.GC(ctx, GCOptions{DryRun: true, Keep: []digest.Digest{d}})
			if err != nil || len(rep.Damaged) != 1 || rep.Damaged[0] != BlobsDir+"/"+d.Hex() || rep.KeptBlobs != 0 {
				t.Fatalf("gc --dry-run: %+v %v", rep, err)
			}
			if b, _ := os.ReadFile(s.Path(d)); !strings.HasPrefix(string(b), "DAMAGED") {
				t.Fatal("the dry run changed the blob")
			}
			return false
		}},
		{"GC removes it although a root names it", func(t *testing.T, s *Store, d digest.Digest) bool {
			rep, err := s.GC(ctx, GCOptions{Keep: []digest.Digest{d}})
			if err != nil || len(rep.Damaged) != 1 || len(rep.Removed) != 1 || rep.KeptBlobs != 0 {
				t.Fatalf("gc: %+v %v", rep, err)
			}
			return true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			d := put(t, s, body)
			cache := filepath.Join(s.Home(), UnpackedDir, d.Hex())
			os.MkdirAll(filepath.Dir(cache), 0o755)
			os.WriteFile(cache, []byte("members"), 0o444)
			damage(t, s.Path(d))
			gone := tt.find(t, s, d)
			dryRun := strings.Contains(tt.name, "dry run")
			for p, want := range map[string]bool{s.Path(d): gone, s.stampPath(d): gone, cache: !dryRun} {
				if _, err := os.Lstat(p); want != errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: gone=%v, want %v", p, !want, want)
				}
			}
			if gone {
				if ok, _, err := s.Check(d); ok || err != nil {
					t.Fatalf("after removal: %v %v", ok, err)
				}
				if err := s.Put(ctx, d, int64(len(body)), strings.NewReader(body)); err != nil {
					t.Fatal(err)
				}
			}
			// Stored again (or left alone by a dry run): the advised
			// remedy leaves a good blob.
			if gone || tt.name == "Put replaces it" {
				f, _, err := s.OpenVerified(d, "w.whl")
				if err != nil {
					t.Fatalf("after storing it again: %v", err)
				}
				f.Close()
			}
		})
	}
}

// TestModes: what the store writes has the modes docs/store.md gives:
// directories 0755, blobs and stamps 0444 (umask 022, as operators have).
func TestModes(t *testing.T) {
	s := open(t)
	d := put(t, s, "moded")
	for p, want := range map[string]os.FileMode{
		BlobsDir: 0o755 | os.ModeDir, StampsDir: 0o755 | os.ModeDir, EnvsDir: 0o755 | os.ModeDir, TmpDir: 0o755 | os.ModeDir,
		BlobsDir + "/" + d.Hex(): 0o444, StampsDir + "/" + d.Hex(): 0o444, lockName: 0o644, gateName: 0o644,
	} {
		fi, err := os.Lstat(filepath.Join(s.Home(), p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
}

// TestSpecialFilesInStore: a FIFO or a symlink put where a blob, its stamp,
// a seal or an env's lock file belongs is not waited on. Before, the open
// of a FIFO blob, stamp or seal blocked for ever (env create, fetch and gc
// hung, SIGTERM did not end them); a symlinked blob was followed and
// trusted as a blob. Now a FIFO or symlink blob is damaged (removed; fetch
// it), a FIFO stamp means a rehash, a FIFO seal stops gc with an error.
func TestSpecialFilesInStore(t *testing.T) {
	ctx := context.Background()
	within := func(t *testing.T, what string, fn func()) {
		t.Helper()
		testdir.Returns(t, what, func() error { fn(); return nil })
	}
	mkfifo := func(t *testing.T, p string) {
		t.Helper()
		os.Remove(p)
		if err := unix.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run("blob is a "+kind, func(t *testing.T) {
			s := open(t)
			d := put(t, s, "wheel bytes")
			p := s.Path(d)
			if kind == "fifo" {
				mkfifo(t, p)
			} else {
				outside := filepath.Join(t.TempDir(), "outside")
				os.WriteFile(outside, []byte("wheel bytes"), 0o444)
				os.Remove(p)
				if err := os.Symlink(outside, p); err != nil {
					t.Fatal(err)
				}
			}
			within(t, "OpenVerified", func() {
				_, _, err := s.OpenVerified(d, "w.whl")
				if !errors.Is(err, refusal.HashMismatch) || !strings.Contains(err.Error(), ", not a file holding the bytes of "+d.String()) {
					t.Errorf("OpenVerified: %v, want hash_mismatch (not a file holding its bytes)", err)
				}
			})
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the %s is still there: %v", kind, err)
			}
			if err := s.Put(ctx, d, int64(len("wheel bytes")), strings.NewReader("wheel bytes")); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("after Put: %v %v", fi, err)
			}
		})
	}
	t.Run("stamp is a fifo", func(t *testing.T) {
		s := open(t)
		d := put(t, s, "wheel bytes")
		mkfifo(t, filepath.Join(s.Home(), StampsDir, d.Hex()))
		within(t, "Check", func() {
			if ok, _, err := s.Check(d); !ok || err != nil {
				t.Errorf("Check: %v %v", ok, err)
			}
		})
	})
	t.Run("seal is a fifo", func(t *testing.T) {
		s := open(t)
		seal := filepath.Join(s.Home(), EnvsDir, strings.Repeat("a", 64)+".seal.json")
		mkfifo(t, seal)
		within(t, "GC", func() {
			if _, err := s.GC(ctx, GCOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("GC: %v, want an error naming the seal", err)
			}
		})
	})
	t.Run("env lock is a fifo", func(t *testing.T) {
		s := open(t)
		hex := strings.Repeat("b", 64)
		mkfifo(t, filepath.Join(s.Home(), EnvsDir, "."+hex+".lock"))
		os.MkdirAll(filepath.Join(s.Home(), EnvsDir, hex), 0o755) // debris: a tree without its seal
		within(t, "GC", func() {
			if _, err := s.GC(ctx, GCOptions{}); err != nil {
				t.Errorf("GC: %v", err)
			}
		})
	})
}

// TestNotRegularBlobSaysWhatStandsThere: a blob that is not a regular
// file is described as what stands in its place, in a plain sentence, with
// what to do: the fetch remedy once it is removed, removing it as the
// store's owner when it cannot be. It said "(it is not a regular file, not
// sha256:…)", naming neither what stood there nor what was missing.
func TestNotRegularBlobSaysWhatStandsThere(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		make       func(t *testing.T, p string)
		removed    bool
	}{
		{"empty directory", "was a directory, not a file holding the bytes of sha256:", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"directory", "is a directory, not a file holding the bytes of sha256:", func(t *testing.T, p string) {
			if err := os.MkdirAll(filepath.Join(p, "inner"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"fifo", "was a FIFO (named pipe), not a file holding the bytes of sha256:", func(t *testing.T, p string) {
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"symlink", "was a symbolic link to /etc/passwd, not a file holding the bytes of sha256:", func(t *testing.T, p string) {
			if err := os.Symlink("/etc/passwd", p); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			d := put(t, s, "wheel bytes")
			p := s.Path(d)
			os.Chmod(p, 0o644)
			os.Remove(p)
			tc.make(t, p)
			// gc's dry run leaves it there and says so.
			_, _, derr := s.open(d, false)
			if want := "the store's blob " + p + " is " + strings.SplitN(tc.says, " ", 2)[1]; derr == nil || !strings.HasPrefix(derr.Error(), want) || !strings.HasSuffix(derr.Error(), "; it was left there (a dry run)") {
				t.Errorf("dry run: %v, want %q… it was left there (a dry run)", derr, want)
			}
			_, _, err := s.OpenVerified(d, "w.whl")
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if !strings.Contains(msg, "the store's blob "+p+" "+tc.says+d.Hex()) || strings.Contains(msg, "it is not a regular file") {
				t.Errorf("OpenVerified: %v, want %q", err, tc.says)
			}
			if tc.removed {
				if !errors.Is(err, refusal.HashMismatch) || !strings.HasSuffix(msg, ", and was removed") {
					t.Errorf("OpenVerified: %v, want hash_mismatch ending \", and was removed\"", err)
				}
				if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionFetch {
					t.Errorf("remedy %+v, want fetch", r)
				}
				if _, lerr := os.Lstat(p); !errors.Is(lerr, os.ErrNotExist) {
					t.Errorf("still there: %v", lerr)
				}
				return
			}
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(msg, "remove it as the store's owner, then fetch it again") || !strings.Contains(msg, "and could not be removed (remove "+p+": directory not empty)") {
				t.Errorf("OpenVerified: %v, want materialize_failed saying to remove it", err)
			}
			if _, err := s.GC(context.Background(), GCOptions{Keep: []digest.Digest{d}}); err == nil || !strings.Contains(err.Error(), "is a directory, not a file holding the bytes of "+d.String()) || !strings.HasSuffix(err.Error(), "; remove it as the store's owner, then run gc again and fetch its wheel again") {
				t.Errorf("GC: %v, want the directory and what to do", err)
			}
		})
	}
}

// TestDamagedBlobNotRemovable: a blob that is damaged and cannot be
// removed (here a non-empty directory in its place) is the store's
// failure, materialize_failed saying to remove it, with no fetch remedy:
// before, it was hash_mismatch advising env create --replace, which
// failed the same way for as long as it was there.
func TestDamagedBlobNotRemovable(t *testing.T) {
	s := open(t)
	d := put(t, s, "wheel bytes")
	p := s.Path(d)
	os.Chmod(p, 0o644)
	os.Remove(p)
	if err := os.MkdirAll(filepath.Join(p, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.OpenVerified(d, "w.whl")
	if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), "remove it as the store's owner") || refusal.RemedyOf(err) != nil {
		t.Fatalf("OpenVerified: %v (remedy %+v), want materialize_failed saying to remove it", err, refusal.RemedyOf(err))
	}
}

// TestDocDamageExample: the shell lines of docs/store.md that damage a
// blob in place (all but the fetch that follows them) work as written for
// the store's owner who is not root (as root, this test runs them as uid
// 65534 on a store it owns), leave the blob's size, mode and mtime as they
// were, and make it damaged. The doc said `dd conv=notrunc` with no
// `chmod u+w`: blobs are 0444, and dd failed with Permission denied for
// anyone but root. They run where docs/operator.md leaves its reader
// (build/fixtures, the runtime's wheel in wheels/ below it): the doc named
// the wheel as if it were in the working directory, and there sha256sum
// found no file, $b named the blobs directory, and the lines made it
// read-only.
func TestDocDamageExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "store.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(doc), "\n") {
		switch {
		case len(lines) == 0 && !strings.HasPrefix(l, `    b="${CRUXPROV_HOME`):
		case strings.HasPrefix(l, "    cruxprov fetch"), !strings.HasPrefix(l, "    "):
			goto found
		default:
			lines = append(lines, strings.TrimPrefix(l, "    "))
		}
	}
found:
	if len(lines) == 0 {
		t.Fatal(`docs/store.md has no block starting b="${CRUXPROV_HOME…`)
	}
	script := "set -e\n" + strings.Join(lines, "\n") + "\n"

	base := t.TempDir()
	root := os.Geteuid() == 0
	if root {
		asuser.Require(t, "run the doc's lines as a user who is not root")
		base = asuser.Dir(t, "cruxprov-dd-")
	}
	home, wheels := filepath.Join(base, "home"), filepath.Join(base, "wheels")
	s, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("the runtime wheel's bytes ", 20))
	d := digest.Sum(body)
	if err := s.Put(context.Background(), d, int64(len(body)), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wheels, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wheels, "cruxible_provider_runtime-0.2.0-py3-none-any.whl"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if root {
		if out, err := exec.Command("chown", "-R", "65534:65534", base).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		cmd = asuser.Command(65534, 65534, "/bin/bash", "-c", script)
	} else {
		cmd = exec.Command("/bin/bash", "-c", script)
	}
	cmd.Dir = base // build/fixtures: the wheels are in wheels/
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_HOME=" + home}
	before, err := os.Stat(s.Path(d))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the doc's lines as the store's owner (not root): %v\n%s", err, out)
	}
	after, err := os.Stat(s.Path(d))
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("stat before %v %v %v, after %v %v %v", before.Size(), before.Mode(), before.ModTime(), after.Size(), after.Mode(), after.ModTime())
	}
	var de *DamagedError
	if ok, _, err := s.Check(d); ok || !errors.As(err, &de) {
		t.Fatalf("the blob the doc damaged: Check %v %v", ok, err)
	}
}

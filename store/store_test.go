package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cruxible/cruxprov/internal/testdir"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// blobDir lists blobs/sha256, temps included.
func blobDir(t *testing.T, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Home(), BlobsDir))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestLayout(t *testing.T) {
	s := open(t)
	for _, d := range []string{BlobsDir, EnvsDir, OCIDir, RegistryDir, ReceiptsDir, TmpDir} {
		if fi, err := os.Stat(filepath.Join(s.Home(), d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
}

func TestPut(t *testing.T) {
	data := []byte("wheel bytes")
	d := digest.Sum(data)
	other := digest.Sum([]byte("other"))
	tests := []struct {
		name string
		d    digest.Digest
		size int64
		body []byte
		want error
	}{
		{"ok", d, int64(len(data)), data, nil},
		{"ok without size", d, 0, data, nil},
		{"wrong bytes", other, int64(len(data)), data, refusal.HashMismatch},
		{"too long", d, int64(len(data)) - 1, data, refusal.SizeMismatch},
		{"too short", d, int64(len(data)) + 5, data, refusal.SizeMismatch},
		{"no digest", digest.Digest{}, 0, data, refusal.HashMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			err := s.Put(context.Background(), tt.d, tt.size, bytes.NewReader(tt.body))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(s.Path(d))
				if err != nil || fi.Mode().Perm() != 0o444 {
					t.Fatalf("blob: %v %v", fi, err)
				}
				if got := blobDir(t, s); len(got) != 1 || got[0] != d.Hex() {
					t.Errorf("store holds %v", got)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got := blobDir(t, s); len(got) != 0 {
				t.Errorf("store holds %v after a refusal", got)
			}
		})
	}
}

type failingReader struct{ n int }

var errBroken = errors.New("connection broke")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return copy(p, "abc"), nil
	}
	return 0, errBroken
}

func TestPutReaderErrorAndCancel(t *testing.T) {
	s := open(t)
	d := digest.Sum([]byte("x"))
	if err := s.Put(context.Background(), d, 0, &failingReader{n: 3}); !errors.Is(err, errBroken) || refusal.CodeOf(err) != "" {
		t.Fatalf("reader error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, d, 0, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if got := blobDir(t, s); len(got) != 0 {
		t.Errorf("debris: %v", got)
	}
}

func TestCleanStaging(t *testing.T) {
	s := open(t)
	// A temp a live writer holds, and one a crashed writer left.
	held, err := createTemp(filepath.Join(s.Home(), BlobsDir), "aa")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	stale := filepath.Join(s.Home(), BlobsDir, tempPrefix+"bb-123")
	os.WriteFile(stale, []byte("partial"), 0o644)
	// A stamp being recorded, and one a process SIGKILLed while it
	// recorded it left (found by chaos runs of env create --replace: it
	// stayed there forever, gc included).
	os.MkdirAll(filepath.Join(s.Home(), StampsDir), 0o755)
	heldStamp, err := createTemp(filepath.Join(s.Home(), StampsDir), "stamp")
	if err != nil {
		t.Fatal(err)
	}
	defer heldStamp.Close()
	staleStamp := filepath.Join(s.Home(), StampsDir, tempPrefix+"stamp-456")
	os.WriteFile(staleStamp, []byte("v1 1 2 3 4"), 0o444)
	live, err := s.Stage("env")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(live.Path, "f"), []byte("x"), 0o644)
	dead, err := s.Stage("env")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dead.Path, "ro", "sub"), 0o755)
	os.Chmod(filepath.Join(dead.Path, "ro"), 0o555)
	dead.lock.Close() // as if its process died
	lockless := filepath.Join(s.Home(), TmpDir, "crashed-before-lock")
	os.Mkdir(lockless, 0o755)

	removed, err := s.CleanStaging(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{BlobsDir + "/" + filepath.Base(stale), StampsDir + "/" + filepath.Base(staleStamp), TmpDir + "/" + filepath.Base(dead.Path), TmpDir + "/crashed-before-lock"}
	sort.Strings(want)
	sort.Strings(removed)
	if strings.Join(removed, ",") != strings.Join(want, ",") {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, f := range []*os.File{held, heldStamp} {
		if _, err := os.Stat(f.Name()); err != nil {
			t.Errorf("held temp removed: %v", err)
		}
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Errorf("live staging removed: %v", err)
	}
	for _, p := range []string{stale, staleStamp, dead.Path, dead.Path + ".lock", lockless} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there", p)
		}
	}
	if err := live.Release(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Home(), TmpDir)); len(ents) != 0 {
		t.Errorf("tmp not empty after release: %v", ents)
	}
}

func put(t *testing.T, s *Store, b string) digest.Digest {
	t.Helper()
	d := digest.Sum([]byte(b))
	if err := s.Put(context.Background(), d, int64(len(b)), strings.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGC(t *testing.T) {
	s := open(t)
	sealed, pinned, loose := put(t, s, "sealed"), put(t, s, "pinned"), put(t, s, "loose")
	kept := put(t, s, "kept by option")
	seal := `{"schema":"cruxprov.seal/v1","resolution":{"packages":[{"name":"a","sha256":"` + sealed.String() + `"}]}}`
	os.WriteFile(filepath.Join(s.Home(), EnvsDir, "0123.seal.json"), []byte(seal), 0o444)
	// A registry file naming a blob is no root: gc never scans the
	// registry's files (its history names every proposal ever made); the
	// caller passes what pins name in Keep.
	os.MkdirAll(filepath.Join(s.Home(), RegistryDir, "pins"), 0o755)
	os.WriteFile(filepath.Join(s.Home(), RegistryDir, "pins", "p.json"), []byte(`{"sha256": "`+loose.Hex()+`"}`), 0o644)
	os.WriteFile(filepath.Join(s.Home(), BlobsDir, tempPrefix+"zz-1"), []byte("debris"), 0o644)

	// The loose blob's stamp goes with it (and its unpacked-cache entry).
	os.MkdirAll(filepath.Join(s.Home(), UnpackedDir), 0o755)
	for _, d := range []digest.Digest{loose, sealed} {
		os.WriteFile(filepath.Join(s.Home(), UnpackedDir, d.Hex()), []byte("members"), 0o444)
	}
	rep, err := s.GC(context.Background(), GCOptions{DryRun: true, Keep: []digest.Digest{kept, pinned}})
	if err != nil {
		t.Fatal(err)
	}
	wantRemoved := []string{BlobsDir + "/" + tempPrefix + "zz-1", BlobsDir + "/" + loose.Hex(), UnpackedDir + "/" + loose.Hex()}
	sort.Strings(wantRemoved)
	if strings.Join(rep.Removed, ",") != strings.Join(wantRemoved, ",") || rep.KeptBlobs != 3 {
		t.Fatalf("dry run: %+v", rep)
	}
	if len(blobDir(t, s)) != 5 {
		t.Fatal("dry run removed something")
	}
	rep, err = s.GC(context.Background(), GCOptions{Keep: []digest.Digest{kept, pinned}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sealed.Hex(), pinned.Hex(), kept.Hex()}
	sort.Strings(want)
	if got := blobDir(t, s); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after gc: %v, want %v", got, want)
	}
	for _, p := range []string{StampsDir + "/" + sealed.Hex(), UnpackedDir + "/" + sealed.Hex()} {
		if _, err := os.Stat(filepath.Join(s.Home(), p)); err != nil {
			t.Errorf("a kept blob's %s: %v", p, err)
		}
	}
	for _, p := range []string{StampsDir + "/" + loose.Hex(), UnpackedDir + "/" + loose.Hex()} {
		if _, err := os.Stat(filepath.Join(s.Home(), p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a removed blob's %s is left: %v", p, err)
		}
	}

	// A seal gc cannot read stops it: it must not guess what is referenced.
	os.WriteFile(filepath.Join(s.Home(), EnvsDir, "bad.seal.json"), []byte("{"), 0o644)
	if _, err := s.GC(context.Background(), GCOptions{}); err == nil {
		t.Error("gc ran past an unreadable seal")
	}
	os.Remove(filepath.Join(s.Home(), EnvsDir, "bad.seal.json"))

	// Never while another holder has the store lock.
	unlock, err := s.LockShared(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(context.Background(), GCOptions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("gc beside a shared holder: %v", err)
	}
	unlock()
	if _, err := s.GC(context.Background(), GCOptions{}); err != nil {
		t.Errorf("gc after release: %v", err)
	}
}

// TestUnprivilegedReader: an executor with read access only can read
// blobs and cannot change them (DESIGN §14).
func TestUnprivilegedReader(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to switch users")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	dir, err := os.MkdirTemp("", "store-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	s, err := Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	d := put(t, s, "bytes")
	as := func(script string) error {
		return exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).Run()
	}
	if err := as("cat " + s.Path(d) + " >/dev/null"); err != nil {
		t.Errorf("unprivileged read: %v", err)
	}
	if err := as("echo x >> " + s.Path(d)); err == nil {
		t.Error("unprivileged append succeeded")
	}
	if err := as("rm -f " + s.Path(d)); err == nil {
		if _, serr := os.Stat(s.Path(d)); serr != nil {
			t.Error("unprivileged remove succeeded")
		}
	}
	b, _ := os.ReadFile(s.Path(d))
	if string(b) != "bytes" {
		t.Errorf("blob changed: %q", b)
	}
}

// TestConcurrentPuts: many writers at once (sharing directory fsyncs), two
// of them per blob; every blob ends complete, with no temp left.
func TestConcurrentPuts(t *testing.T) {
	s := open(t)
	var wg sync.WaitGroup
	want := map[string]bool{}
	for i := 0; i < 40; i++ {
		b := strings.Repeat(fmt.Sprint(i%20), 1000+i%20)
		want[digest.Sum([]byte(b)).Hex()] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(context.Background(), digest.Sum([]byte(b)), int64(len(b)), strings.NewReader(b)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := blobDir(t, s)
	if len(got) != len(want) {
		t.Fatalf("store holds %d entries, want %d: %v", len(got), len(want), got)
	}
	for _, h := range got {
		if !want[h] {
			t.Errorf("unexpected %s", h)
		}
	}
}

// TestWriteCommit: pending blobs are invisible and survive a concurrent
// cleanup until Commit; a cancelled Commit and Discard leave nothing.
func TestWriteCommit(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	var ps []*Pending
	for _, b := range []string{"one", "two", "three"} {
		p, err := s.Write(ctx, digest.Sum([]byte(b)), int64(len(b)), strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if ok, _ := s.Has(ps[0].Digest()); ok {
		t.Fatal("a pending blob is visible")
	}
	if removed, err := s.CleanStaging(ctx); err != nil || len(removed) != 0 {
		t.Fatalf("cleanup took pending blobs: %v %v", removed, err)
	}
	if err := s.Commit(ctx, ps[:2]); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Commit(cctx, ps[2:]); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled commit: %v", err)
	}
	want := []string{ps[0].Digest().Hex(), ps[1].Digest().Hex()}
	sort.Strings(want)
	if got := blobDir(t, s); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("store holds %v, want %v", got, want)
	}
	// Present already: Write gives a Pending that Commit skips.
	p, err := s.Write(ctx, ps[0].Digest(), 3, strings.NewReader("one"))
	if err != nil || p.Size() != 3 {
		t.Fatal(p, err)
	}
	p.Discard()
	if err := s.Commit(ctx, []*Pending{p}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Has(ps[0].Digest()); !ok {
		t.Error("Discard of a present blob removed it")
	}
}

// TestIngest: bytes whose sha256 is not known beforehand are pending
// under the digest they hash to, readable from their private temp until
// Commit, which stores exactly them, or keeps the blob present already;
// a reader's error, cancellation and Discard leave nothing.
func TestIngest(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	data := []byte("a root wheel's bytes")
	p, err := s.Ingest(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest() != digest.Sum(data) || p.Size() != int64(len(data)) {
		t.Fatalf("pending %s, %d bytes; want %s, %d", p.Digest(), p.Size(), digest.Sum(data), len(data))
	}
	got := make([]byte, len(data))
	if n, err := p.ReadAt(got, 0); n != len(data) || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt: %q, %v", got[:n], err)
	}
	if ok, _ := s.Has(p.Digest()); ok {
		t.Fatal("an ingested blob is visible before Commit")
	}
	if removed, err := s.CleanStaging(ctx); err != nil || len(removed) != 0 {
		t.Fatalf("cleanup took an ingested temp: %v %v", removed, err)
	}
	if err := s.Commit(ctx, []*Pending{p}); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := s.Check(p.Digest()); !ok || err != nil {
		t.Fatalf("after Commit: %v, %v", ok, err)
	}
	if fi, err := os.Stat(s.Path(p.Digest())); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("blob: %v %v", fi, err)
	}
	if _, err := p.ReadAt(got, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("ReadAt after Commit: %v", err)
	}
	// The same bytes again: the blob present is kept, the temp removed.
	var before unix.Stat_t
	if err := unix.Stat(s.Path(p.Digest()), &before); err != nil {
		t.Fatal(err)
	}
	q, err := s.Ingest(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, []*Pending{q}); err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	if err := unix.Stat(s.Path(p.Digest()), &after); err != nil || after.Ino != before.Ino {
		t.Errorf("the blob present was replaced (inode %d, was %d): %v", after.Ino, before.Ino, err)
	}
	if got := blobDir(t, s); len(got) != 1 || got[0] != p.Digest().Hex() {
		t.Errorf("store holds %v", got)
	}
	// Nothing is left by a reader's error, a cancellation or Discard.
	if _, err := s.Ingest(ctx, &failingReader{n: 3}); !errors.Is(err, errBroken) || refusal.CodeOf(err) != "" {
		t.Errorf("reader error: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Ingest(cctx, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	r, err := s.Ingest(ctx, strings.NewReader("discarded"))
	if err != nil {
		t.Fatal(err)
	}
	r.Discard()
	r.Discard()
	if err := s.Commit(ctx, []*Pending{r}); err != nil {
		t.Fatal(err)
	}
	if got := blobDir(t, s); len(got) != 1 {
		t.Errorf("debris: %v", got)
	}
}

// TestIngestUnwritableStore: in a store this user cannot write (an
// executor's view of an operator's store: a read-only mount as root, a
// read-only blobs directory otherwise), Ingest still hashes the bytes
// into a private copy (outside the store, with no name) that ReadAt
// reads, and Commit keeps the blob the store has, or says the store is
// not writable; nothing is written in the store either way.
func TestIngestUnwritableStore(t *testing.T) {
	var home string
	if os.Geteuid() == 0 {
		home = filepath.Join(smallDisk(t, "1m"), "home")
	} else {
		home = filepath.Join(t.TempDir(), "home")
	}
	s, err := Open(home)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	present := put(t, s, "present")
	blobs := filepath.Join(home, BlobsDir)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-o", "remount,ro", filepath.Dir(home)).CombinedOutput(); err != nil {
			t.Skipf("cannot remount read-only: %v %s", err, out)
		}
	} else {
		if err := os.Chmod(blobs, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(blobs, 0o755) })
	}
	before := blobDir(t, s)
	for _, tc := range []struct {
		body   string
		stored bool
	}{{"present", true}, {"absent", false}} {
		t.Run(tc.body, func(t *testing.T) {
			p, err := s.Ingest(ctx, strings.NewReader(tc.body))
			if err != nil {
				t.Fatalf("%s: %v", tc.body, err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(int(p.f.Fd()), &st); err != nil || st.Nlink != 0 {
				t.Errorf("%s: the copy has %d names (%v), want none", tc.body, st.Nlink, err)
			}
			got := make([]byte, len(tc.body))
			if n, err := p.ReadAt(got, 0); n != len(got) || err != nil || string(got) != tc.body || p.Digest() != digest.Sum([]byte(tc.body)) {
				t.Errorf("%s: ReadAt %q, %v; digest %s", tc.body, got[:n], err, p.Digest())
			}
			err = s.Commit(ctx, []*Pending{p})
			if tc.stored && (err != nil || p.Digest() != present) {
				t.Errorf("%s: Commit: %v", tc.body, err)
			}
			if !tc.stored && (err == nil || !strings.Contains(err.Error(), "the store cannot be written")) {
				t.Errorf("%s: Commit of a blob the store lacks: %v, want not writable", tc.body, err)
			}
			if _, err := p.ReadAt(got, 0); !errors.Is(err, os.ErrClosed) {
				t.Errorf("%s: the copy is still open after Commit: %v", tc.body, err)
			}
		})
	}
	// A full temp directory is named as such: not a *SpaceError, whose
	// advice (free the store's disk, gc it) is not this user's to follow.
	if os.Geteuid() == 0 {
		tmp := smallDisk(t, "256k")
		t.Setenv("TMPDIR", tmp)
		_, err := s.Ingest(ctx, bytes.NewReader(make([]byte, 1<<20)))
		var se *SpaceError
		if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), tmp) || !strings.Contains(err.Error(), "TMPDIR") {
			t.Errorf("a full TMPDIR: %v, want an error naming it", err)
		}
	}
	// A temp directory this user cannot write either (a reader's TMPDIR
	// missing): the copy is made all the same, in memory.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	p, err := s.Ingest(ctx, strings.NewReader("no temp dir"))
	if err != nil {
		t.Fatalf("no TMPDIR: %v", err)
	}
	got := make([]byte, len("no temp dir"))
	if n, err := p.ReadAt(got, 0); n != len(got) || err != nil || string(got) != "no temp dir" {
		t.Errorf("no TMPDIR: ReadAt %q, %v", got[:n], err)
	}
	if err := s.Commit(ctx, []*Pending{p}); err == nil || !strings.Contains(err.Error(), "the store cannot be written") {
		t.Errorf("no TMPDIR: Commit of a blob the store lacks: %v", err)
	}
	if after := blobDir(t, s); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the store's blobs went from %v to %v", before, after)
	}
}

// smallDisk mounts a tmpfs of size bytes on a new directory (unmounted at
// cleanup): a real full disk.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	return testdir.Tmpfs(t, size)
}

// TestWriteNoSpace: a blob that does not fit on the store's file system
// is a *SpaceError naming the store (not a refusal), and leaves no temp.
func TestWriteNoSpace(t *testing.T) {
	s, err := Open(filepath.Join(smallDisk(t, "128k"), "home"))
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 32<<10) // 512 KiB
	d := digest.Sum(body)
	err = s.Put(context.Background(), d, int64(len(body)), bytes.NewReader(body))
	var se *SpaceError
	if !errors.As(err, &se) || se.Home != s.Home() || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), s.Home()) {
		t.Fatalf("put on a full disk: %v", err)
	}
	if got := blobDir(t, s); len(got) != 0 {
		t.Errorf("left in the store: %v", got)
	}
	if _, err := s.Ingest(context.Background(), bytes.NewReader(body)); !errors.As(err, &se) || refusal.CodeOf(err) != "" {
		t.Fatalf("ingest on a full disk: %v", err)
	}
	if got := blobDir(t, s); len(got) != 0 {
		t.Errorf("left in the store by Ingest: %v", got)
	}
}

// fillDisk writes a file in dir until its file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestIngestStoredOnFullDisk: bytes Ingest is given that the store has
// already as a verified blob need no room: on a full disk they are the
// blob present (readable, kept by Commit, not removed by Discard), not a
// *SpaceError (and Commit stores them again if the blob went meanwhile).
// An env create refused for free space (its root wheel
// stored) and run again failed "no space left … writing a blob", exit
// 1, before it reached its free-space refusal, because the root wheel
// was copied into the store again first. Other bytes on that disk are
// still a *SpaceError that leaves nothing.
func TestIngestStoredOnFullDisk(t *testing.T) {
	disk := smallDisk(t, "2m")
	s, err := Open(filepath.Join(disk, "home"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := bytes.Repeat([]byte("a root wheel.. "), 40<<10) // 600 KiB
	d := digest.Sum(body)
	if err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	fillDisk(t, disk)
	before := blobDir(t, s)
	for round := range 2 {
		p, err := s.Ingest(ctx, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("ingesting a blob the store has, on a full disk: %v", err)
		}
		if p.Digest() != d || p.Size() != int64(len(body)) {
			t.Fatalf("pending %s, %d bytes; want %s, %d", p.Digest(), p.Size(), d, len(body))
		}
		got := make([]byte, len(body))
		if n, err := p.ReadAt(got, 0); n != len(body) || err != nil || !bytes.Equal(got, body) {
			t.Fatalf("ReadAt: %d bytes, %v", n, err)
		}
		if round == 0 {
			p.Discard()
		} else {
			// Removed meanwhile (gc, which freed room too): Commit
			// stores the bytes held open again.
			if err := os.Remove(s.Path(d)); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, []*Pending{p}); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			fillDisk(t, disk)
		}
		if ok, _, err := s.Check(d); !ok || err != nil {
			t.Fatalf("round %d: the blob is gone: %v, %v", round, ok, err)
		}
	}
	// Other bytes (even a longer source) do not fit: a *SpaceError.
	other := append(bytes.Repeat([]byte("another wheel. "), 80<<10), body...)
	var se *SpaceError
	if _, err := s.Ingest(ctx, bytes.NewReader(other)); !errors.As(err, &se) || refusal.CodeOf(err) != "" {
		t.Fatalf("ingesting other bytes on a full disk: %v, want a *SpaceError", err)
	}
	if got := blobDir(t, s); !slices.Equal(got, before) {
		t.Errorf("store holds %v, had %v", got, before)
	}
}

// TestStageRacesClean: stagings made while CleanStaging runs in a loop
// beside them are never removed under their owners (a cleaner that found
// a new directory before its lock file once removed it), and the cleaner
// still removes what a dead owner left.
func TestStageRacesClean(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	cleaned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				cleaned <- n
				return
			default:
			}
			if _, err := s.CleanStaging(ctx); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				st, err := s.Stage("race")
				if err != nil {
					t.Error(err)
					return
				}
				f := filepath.Join(st.Path, "work")
				if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
					t.Errorf("staging %d removed under its owner: %v", i, err)
				} else if _, err := os.Stat(f); err != nil {
					t.Errorf("staging %d emptied under its owner: %v", i, err)
				}
				st.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d cleanings ran beside 1,200 stagings", <-cleaned)
	// A dead owner's staging (no lock held) goes.
	dead := filepath.Join(s.Home(), TmpDir, "dead-1")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dead+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CleanStaging(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dead owner's staging is still there: %v", err)
	}
}

// TestGCEnvDebris: what a process killed while it committed, replaced or
// removed an env leaves in envs/ (found by SIGKILLing gc --envs: the tree
// it had moved aside stayed there, gc after gc) is removed by gc when the
// env's lock is free, and left to its owner when another process holds it.
func TestGCEnvDebris(t *testing.T) {
	s := open(t)
	envs := filepath.Join(s.Home(), EnvsDir)
	dead, busy, sealed := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	t.Cleanup(func() { // the frozen trees gc keeps, writable again for TempDir's removal (not root)
		filepath.WalkDir(envs, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	tree := func(p string) { // a frozen tree, as an env is
		os.MkdirAll(filepath.Join(p, "lib", "sub"), 0o755)
		os.WriteFile(filepath.Join(p, "lib", "sub", "x.py"), []byte("x"), 0o444)
		os.Chmod(filepath.Join(p, "lib", "sub"), 0o555)
		os.Chmod(filepath.Join(p, "lib"), 0o555)
		os.Chmod(p, 0o555)
	}
	var wantDebris []string
	for _, h := range []string{dead, busy} {
		tree(filepath.Join(envs, "."+h+".old.tmp-123", "env")) // moved aside by env remove / gc --envs / --replace
		tree(filepath.Join(envs, h))                           // renamed into place, killed before its seal
		os.WriteFile(filepath.Join(envs, h+".index"), []byte("ix"), 0o444)
		os.WriteFile(filepath.Join(envs, "."+h+".seal.json.tmp-456"), []byte("{"), 0o644)
		os.WriteFile(filepath.Join(envs, "."+h+".lock"), nil, 0o644)
	}
	for _, n := range []string{"." + dead + ".old.tmp-123", dead, dead + ".index", "." + dead + ".seal.json.tmp-456"} {
		wantDebris = append(wantDebris, EnvsDir+"/"+n)
	}
	sort.Strings(wantDebris)
	lone := strings.Repeat("d", 64)
	os.WriteFile(filepath.Join(envs, "."+lone+".lock"), nil, 0o644)
	// A sealed env is no debris, nor is its lock.
	tree(filepath.Join(envs, sealed))
	os.WriteFile(filepath.Join(envs, sealed+".index"), []byte("ix"), 0o444)
	os.WriteFile(filepath.Join(envs, sealed+".seal.json"), []byte(`{}`), 0o444)
	os.WriteFile(filepath.Join(envs, "."+sealed+".lock"), nil, 0o644)
	// busy's lock is held, as by a create, a replace or a remove running.
	lf, err := os.Open(filepath.Join(envs, "."+busy+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		ents, _ := os.ReadDir(envs)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	before := list()
	rep, err := s.GC(context.Background(), GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Removed, ",") != strings.Join(wantDebris, ",") {
		t.Errorf("dry run lists %v, want %v", rep.Removed, wantDebris)
	}
	// The bytes of dead's debris: two trees of one 1-byte file, an index
	// of 2, a seal temp of 1 (gc said "0 B" for whole trees).
	if rep.RemovedBytes != 5 {
		t.Errorf("dry run: %d bytes, want 5", rep.RemovedBytes)
	}
	if got := list(); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Fatalf("dry run removed something: %v", got)
	}
	if rep, err = s.GC(context.Background(), GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Removed, ",") != strings.Join(wantDebris, ",") || rep.RemovedBytes != 5 {
		t.Errorf("removed %v (%d bytes), want %v (5 bytes)", rep.Removed, rep.RemovedBytes, wantDebris)
	}
	// dead's lock went with dead's debris, and a lock left alone (env
	// remove killed before it unlinked it, or an older cruxprov's) goes
	// too: they piled up, one per env removed.
	want := []string{"." + busy + ".lock", "." + busy + ".old.tmp-123", "." + busy + ".seal.json.tmp-456", "." + sealed + ".lock",
		busy, busy + ".index", sealed, sealed + ".index", sealed + ".seal.json"}
	sort.Strings(want)
	if got := list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("envs/ after gc:\n %v\nwant\n %v", got, want)
	}
}

// TestLockSharedErrors: a store lock that cannot be taken is
// materialize_failed naming the store; a wait ended by the caller is an
// interruption wrapping ctx.Err(), never a refusal.
func TestLockSharedErrors(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := s.LockExclusive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.LockShared(ctx); !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
		t.Errorf("a wait the caller ended: %v", err)
	}
	ex()
	lock := filepath.Join(s.Home(), lockName)
	os.Remove(lock)
	os.Symlink(filepath.Join(t.TempDir(), "gone", "lock"), lock) // cannot be opened, even by root
	if _, err := s.LockShared(context.Background()); refusal.CodeOf(err) != refusal.MaterializeFailed || !strings.Contains(err.Error(), s.Home()) {
		t.Errorf("a lock that cannot be taken: %v", err)
	}
}

// endless yields zeros without end and counts them.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.n += int64(len(p))
	return len(p), nil
}

// TestIngestLeavesHalfTheDisk: Ingest reads its source to the end, and a
// root wheel given as a file has no bound but its size (a sparse file of
// a terabyte is a regular file): the copy stops once it has taken half of
// the space that was free when it began, as an unsized Write does, and is
// a *SpaceError that leaves nothing. A root wheel that takes more than
// half of it could not be installed anyway (its blob and its unpacked
// files). Before, the copy wrote until the disk was full, and every other
// writer of that disk failed meanwhile.
func TestIngestLeavesHalfTheDisk(t *testing.T) {
	s, err := Open(filepath.Join(smallDisk(t, "48m"), "home"))
	if err != nil {
		t.Fatal(err)
	}
	src := &endless{}
	_, err = s.Ingest(context.Background(), src)
	var se *SpaceError
	if !errors.As(err, &se) || refusal.CodeOf(err) != "" {
		t.Fatalf("an endless ingest: %v, want a *SpaceError", err)
	}
	t.Logf("after %d bytes: %v", src.n, err)
	if src.n > 32<<20 {
		t.Errorf("Ingest read %d bytes of a 48 MiB disk: it went on past half the free space", src.n)
	}
	if got := blobDir(t, s); len(got) != 0 {
		t.Errorf("left in the store: %v", got)
	}
}

// TestWriteNoInode: a blob written on a file system with blocks free but
// no inode left is a *SpaceError that says so (Inodes, "no inode left …
// df -i") and what helps (removing files), not "no space left" with
// megabytes free.
func TestWriteNoInode(t *testing.T) {
	disk := smallDisk(t, "16m,nr_inodes=64")
	s, err := Open(filepath.Join(disk, "home"))
	if err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(disk, "filler")
	if err := os.Mkdir(fill, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(fill, fmt.Sprint(i)))
		if err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		f.Close()
	}
	body := []byte("a small blob")
	err = s.Put(context.Background(), digest.Sum(body), int64(len(body)), bytes.NewReader(body))
	var se *SpaceError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "no inode left for the store") || !strings.Contains(err.Error(), "df -i") {
		t.Fatalf("put on a file system out of inodes: %v", err)
	}
}

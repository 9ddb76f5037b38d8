package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// holdLayout takes dir's flock as another writer of the layout would.
func holdLayout(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return f
}

// refNames are the ref names of dir's index.json entries, and their
// digests.
func refNames(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ix struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, m := range ix.Manifests {
		names[m.Annotations[refNameAnnotation]] = m.Digest
	}
	return names
}

// TestLayoutWritersTakeTurns: writers into one layout at once (in one
// process, as in several: a flock is an open file's) all end in its
// index.json; each read it before the others wrote, and all but the last
// one's images were lost. Go-containerregistry reads the layout back.
func TestLayoutWritersTakeTurns(t *testing.T) {
	const writers = 4
	for round := range 10 {
		dir := filepath.Join(t.TempDir(), "oci")
		var wg sync.WaitGroup
		errs := make([]error, writers)
		want := map[string]string{}
		for i := range writers {
			img, err := random.Image(64<<10, 2)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := img.Digest()
			name := fmt.Sprintf("img-%d", i)
			want[name] = d.String()
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = writeLayout(context.Background(), dir, img, d, name, nil, nil)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := refNames(t, dir)
		for name, d := range want {
			if got[name] != d {
				t.Fatalf("round %d: %d writers at once, index.json names %v, want %v", round, writers, got, want)
			}
		}
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		if im, err := ix.IndexManifest(); err != nil || len(im.Manifests) != writers {
			t.Fatalf("round %d: go-containerregistry reads %v (%v)", round, im, err)
		}
	}
}

// TestLayoutLockWaitInterrupted: a writer of a layout another holds says
// once that it waits, and stops when its ctx ends (a *LayoutWaitError
// wrapping ctx's error), the layout as it was; once let go, the write
// goes on.
func TestLayoutLockWaitInterrupted(t *testing.T) {
	dir, _, index0 := randomLayout(t)
	h := holdLayout(t, dir)
	img, _ := random.Image(1024, 1)
	d, _ := img.Digest()
	ctx, cancel := context.WithCancel(context.Background())
	var said atomic.Int32
	waiting := func(got string) {
		if got != dir {
			t.Errorf("waits for %s, not %s", got, dir)
		}
		if said.Add(1) == 1 {
			time.AfterFunc(300*time.Millisecond, cancel) // still waiting then, and not saying it again
		}
	}
	err := writeLayout(ctx, dir, img, d, "two", nil, waiting)
	var we *LayoutWaitError
	if !errors.As(err, &we) || !errors.Is(err, context.Canceled) || we.Dir != dir {
		t.Fatalf("interrupted while waiting for the layout: %v", err)
	}
	if said.Load() != 1 {
		t.Errorf("said %d times that it waits", said.Load())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "index.json")); string(b) != string(index0) {
		t.Error("index.json changed by a write that never had the layout")
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", "sha256", d.Hex)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write that never had the layout wrote its image: %v", err)
	}
	h.Close()
	if err := writeLayout(context.Background(), dir, img, d, "two", nil, func(string) { t.Error("waits for a layout nobody holds") }); err != nil {
		t.Fatal(err)
	}
	if got := refNames(t, dir); got["one"] == "" || got["two"] != d.String() {
		t.Errorf("index.json names %v", got)
	}
}

// TestLayoutLockRemovedWhileWaiting: a writer that made the layout and
// failed removes it, holding its lock; one waiting for it then locks
// what it removed, and makes the layout again rather than write into a
// directory no path names.
func TestLayoutLockRemovedWhileWaiting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := holdLayout(t, dir)
	img, _ := random.Image(1024, 1)
	d, _ := img.Digest()
	waits := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- writeLayout(context.Background(), dir, img, d, "one", nil, func(string) { waits <- struct{}{} })
	}()
	select {
	case <-waits:
	case err := <-done:
		t.Fatalf("wrote into a held layout without waiting: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := refNames(t, dir); got["one"] != d.String() {
		t.Errorf("index.json names %v", got)
	}
}

// TestLayoutLockDanglingSymlink: an output that is a symlink to nothing
// is an error naming it (Mkdir finds it there, open finds nothing), not
// a write that retries for ever, and what it names is not made.
func TestLayoutLockDanglingSymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Symlink(gone, dir); err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(1024, 1)
	d, _ := img.Digest()
	err := testdir.Returns(t, "a write into a dangling symlink", func() error {
		return writeLayout(context.Background(), dir, img, d, "one", nil, nil)
	})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a write into a dangling symlink: %v", err)
	}
	if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the symlink's target was made: %v", err)
	}
}

package materialize

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/wheel"
)

// TestFIFOInCachesNotWaitedOn: a FIFO where an unpacked-cache entry, a pyc
// pack or an interpreter probe's cache entry belongs is passed over (the
// wheel installed from its archive, the pack absent, the interpreter
// probed again) at once. Before, each open blocked for ever, and env
// create with it (SIGTERM did not end it either).
func TestFIFOInCachesNotWaitedOn(t *testing.T) {
	within := func(t *testing.T, what string, fn func()) {
		t.Helper()
		testdir.Returns(t, what, func() error { fn(); return nil })
	}
	fifo := func(t *testing.T, p string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("unpacked cache entry", func(t *testing.T) {
		home, tmp := t.TempDir(), t.TempDir()
		const fn = "fifo-1.0-py3-none-any.whl"
		b := wheeltest.Build(t, fn, map[string]string{"fifo/__init__.py": "x = 1\n"})
		w, err := wheel.OpenReader(bytes.NewReader(b), int64(len(b)), fn)
		if err != nil {
			t.Fatal(err)
		}
		d := digest.Sum(b)
		p := fifo(t, filepath.Join(home, filepath.FromSlash(UnpackedCacheDir), d.Hex()))
		o := &opened{w: w}
		within(t, "attachCache", func() {
			if err := attachCache(home, tmp, o, lockfile.ResolvedWheel{SHA256: d}, func(string) {}); err != nil {
				t.Error(err)
			}
		})
		if o.cache != nil && o.cache.src != nil {
			t.Error("the FIFO was taken as the cache entry")
		}
		if _, err := os.Lstat(p); err == nil {
			t.Error("the FIFO is still there")
		}
	})
	t.Run("pyc pack", func(t *testing.T) {
		p := fifo(t, filepath.Join(t.TempDir(), "x-1.0-py3-none-any.whl.pycs"))
		within(t, "openPycPack", func() {
			if _, err := openPycPack(p, [32]byte{1}); err == nil {
				t.Error("a FIFO opened as a pyc pack")
			}
		})
	})
	t.Run("probe cache entry", func(t *testing.T) {
		c := ProbeCache{Dir: t.TempDir()}
		real, ok := resolve("/bin/ls") // any ELF executable: load runs nothing
		if !ok {
			t.Skip("no ELF /bin/ls")
		}
		fifo(t, c.path(real))
		within(t, "load", func() {
			if _, _, ok := c.load("/bin/ls"); ok {
				t.Error("a FIFO read as a probe")
			}
		})
	})
}

package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestLayoutFIFO: a FIFO planted in a layout, in place of a blob or of
// index.json, is refused or replaced, never opened for a writer that
// never comes. Before, image verify (a layer or config blob), and a
// build into the layout (a blob already there, index.json) hung.
func TestLayoutFIFO(t *testing.T) {
	t.Run("verify: a layer blob", func(t *testing.T) {
		dir, img, _ := randomLayout(t)
		d, _ := img.Digest()
		layers, _ := img.Layers()
		ld, _ := layers[0].Digest()
		blob := filepath.Join(dir, "blobs", "sha256", ld.Hex)
		os.Remove(blob)
		if err := syscall.Mkfifo(blob, 0o644); err != nil {
			t.Fatal(err)
		}
		src := layoutSource(dir)
		err := testdir.Returns(t, "blob", func() error {
			rc, err := src.blob(context.Background(), ld, 1)
			if err == nil {
				rc.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO blob of %s: %v", d, err)
		}
	})
	t.Run("build: a blob already there", func(t *testing.T) {
		dir, img, _ := randomLayout(t)
		d, _ := img.Digest()
		layers, _ := img.Layers()
		ld, _ := layers[0].Digest()
		blob := filepath.Join(dir, "blobs", "sha256", ld.Hex)
		os.Remove(blob)
		if err := syscall.Mkfifo(blob, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := testdir.Returns(t, "writeLayout", func() error {
			return writeLayout(context.Background(), dir, img, d, "one", nil, nil)
		}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(blob); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("the FIFO blob was not replaced: %v %v", fi, err)
		}
		lp, _ := layout.FromPath(dir)
		if _, err := lp.Image(d); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("build: index.json", func(t *testing.T) {
		dir, img, _ := randomLayout(t)
		d, _ := img.Digest()
		ix := filepath.Join(dir, "index.json")
		os.Remove(ix)
		if err := syscall.Mkfifo(ix, 0o644); err != nil {
			t.Fatal(err)
		}
		err := testdir.Returns(t, "writeLayout", func() error {
			return writeLayout(context.Background(), dir, img, d, "one", nil, nil)
		})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO index.json: %v", err)
		}
	})
}

// TestShimFIFO: --shim naming a FIFO is refused at once, before, the
// build waited on it for a writer for ever.
func TestShimFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cruxshim")
	if err := syscall.Mkfifo(p, 0o755); err != nil {
		t.Fatal(err)
	}
	err := testdir.Returns(t, "checkShimMachine", func() error {
		return checkShimMachine(p, "cp311-manylinux_2_36_x86_64", "amd64")
	})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO --shim: %v", err)
	}
}

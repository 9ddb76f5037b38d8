package podman

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/refusal"
)

// TestPullLayoutFIFOBlob: a layout whose layer blob is a FIFO is refused
// image_digest_mismatch before podman is asked to pull it. Before, the
// check before a run (which skips rehashing layers) passed, and podman's
// pull waited on the FIFO for ever.
func TestPullLayoutFIFOBlob(t *testing.T) {
	usable(t)
	dir := filepath.Join(t.TempDir(), "layout")
	rnd, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	// An OCI image, as a build makes (podman takes no Docker config there).
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	rl, _ := rnd.Layers()
	if img, err = mutate.Append(img, mutate.Addendum{Layer: rl[0], MediaType: types.OCILayer}); err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(dir, "blobs", "sha256", ld.Hex)
	os.Remove(blob)
	if err := syscall.Mkfifo(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := image.ParseRef(image.LayoutPrefix + dir + "@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	e := &Executor{}
	m, err := e.manifest(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.pull(ctx, ref, m)
	if refusal.CodeOf(err) != refusal.ImageDigestMismatch {
		t.Fatalf("pull of a layout with a FIFO blob: %v (after %v)", err, time.Since(start))
	}
}

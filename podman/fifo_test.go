package podman

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
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

// TestManifestKeyTwice: a pinned manifest that says a key twice is
// refused image_digest_mismatch, though its digest matches, as
// image.Verify refuses it: a caller that dispatches to the executor
// without the verify hook would otherwise run the image as the last of
// the two says (go-containerregistry's reading).
func TestManifestKeyTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		raw  []byte
		code refusal.Code
	}{
		{"as written", raw, ""},
		{"schemaVersion twice", append([]byte(`{"schemaVersion":1,`), raw[1:]...), refusal.ImageDigestMismatch},
		{"config in two cases", append([]byte(`{"Config":{"mediaType":"x","size":1,"digest":"sha256:`+strings.Repeat("0", 64)+`"},`), raw[1:]...), refusal.ImageDigestMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			sum := sha256.Sum256(c.raw)
			hexd := hex.EncodeToString(sum[:])
			if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", hexd), c.raw, 0o644); err != nil {
				t.Fatal(err)
			}
			ref, err := image.ParseRef(image.LayoutPrefix + dir + "@sha256:" + hexd)
			if err != nil {
				t.Fatal(err)
			}
			_, err = (&Executor{}).manifest(context.Background(), ref)
			if refusal.CodeOf(err) != c.code {
				t.Fatalf("manifest: %v, want code %q", err, c.code)
			}
			if err != nil {
				t.Log(err)
			}
			if c.code != "" && !strings.Contains(err.Error(), "the key") {
				t.Fatalf("refusal %q: want it to name the key said twice", err)
			}
		})
	}
}

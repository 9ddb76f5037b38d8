package image

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/cruxible/cruxprov/refusal"
)

// TestBaseNotAsPinned: a base the build cannot read as pinned is refused
// image_digest_mismatch naming the base and saying what to do. Walking
// docs/images.md, a base layout with a flipped layer byte was refused
// "blob sha256:… hashes to sha256:…" alone, whether the interpreter scan
// or the layout writer read it, and a digest the layout or registry does
// not hold said only that its file or manifest was not found.
func TestBaseNotAsPinned(t *testing.T) {
	img, d, dir := randomBaseLayout(t)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(dir, "blobs", "sha256", ld.Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	os.Chmod(blob, 0o644)
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	other := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer mem.Close()
	host := strings.TrimPrefix(mem.URL, "http://")

	check := func(t *testing.T, ref Ref, err error, says string) {
		t.Helper()
		if refusal.CodeOf(err) != refusal.ImageDigestMismatch || !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), says) {
			t.Errorf("%v, want image_digest_mismatch naming %s and saying %q", err, ref, says)
		}
	}
	t.Run("a damaged layer", func(t *testing.T) {
		ref, _ := ParseRef(LayoutPrefix + dir + "@" + d.String())
		bs, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		if err != nil {
			t.Fatal(err)
		}
		ls, _ := bs.img.Layers()
		rc, err := ls[0].Compressed()
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
		}
		check(t, ref, err, "check the digest, or write the base into the layout again")
	})
	t.Run("a digest the layout does not hold", func(t *testing.T) {
		ref, _ := ParseRef(LayoutPrefix + dir + "@" + other.String())
		_, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		check(t, ref, err, "check the digest, or write the base into the layout again")
	})
	t.Run("a digest the registry does not hold", func(t *testing.T) {
		ref, _ := ParseRef(host + "/debian@" + other.String())
		_, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		check(t, ref, err, "check the digest and the repository")
		if strings.Count(err.Error(), "the base is not as it was pinned") != 1 {
			t.Errorf("%v: the advice, once", err)
		}
	})
}

// randomBaseLayout writes a random one-layer linux/amd64 image into a
// fresh layout as a base is (its tag "base"), returning the image, its
// digest and the layout directory.
func randomBaseLayout(t *testing.T) (v1.Image, v1.Hash, string) {
	t.Helper()
	img, err := random.Image(4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	dir := filepath.Join(t.TempDir(), "oci")
	if err := writeLayout(context.Background(), dir, img, d, "base", nil, nil); err != nil {
		t.Fatal(err)
	}
	return img, d, dir
}

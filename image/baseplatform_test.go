package image

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestBaseWithoutThePlatform: a base that has no image for a platform
// was refused platform_unsupported saying only what the base is ("the
// base … is linux/amd64, the platform needs linux/arm64"), met by
// following docs/images.md's two-architecture build on a one-platform
// base; the refusal now says what to pin instead, or to leave the
// platform out (DESIGN §2: a refusal says what to do next).
func TestBaseWithoutThePlatform(t *testing.T) {
	dir, h := testBase(t)
	one, err := ParseRef(LayoutPrefix + dir + "@" + h.String())
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := imagetest.MultiArchBase(t, filepath.Join(t.TempDir(), "multi"))
	multi, err := ParseRef(ix)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ref  Ref
		arch string
		says string
	}{
		{"one image", one, "arm64", "is linux/amd64, the platform needs linux/arm64: pin a multi-platform base by its index's digest (one with a linux/arm64 image), or leave this platform out"},
		{"an index without it", multi, "riscv64", "has no image for linux/riscv64: pin a base index that has one, or leave this platform out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadBase(context.Background(), c.ref, "linux", c.arch, nil)
			if refusal.CodeOf(err) != refusal.PlatformUnsupported || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v, want platform_unsupported saying %q", err, c.says)
			}
		})
	}
}

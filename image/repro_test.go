package image

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestReproducible: two builds in separate homes give one digest; one
// changed input (the shim, the wheel, the base) gives another.
func TestReproducible(t *testing.T) {
	fx, _ := testIndex(t)
	dir, h := testBase(t)
	signed, _, _ := signedBuild(t)
	first := signed.Digest
	if again := build(t, buildCase{out: filepath.Join(t.TempDir(), "b")}).Digest; again != first {
		t.Fatalf("two builds in separate homes: %s and %s", first, again)
	}
	// Another shim: one byte appended.
	shim := filepath.Join(t.TempDir(), "cruxshim")
	b, err := os.ReadFile(testShim(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shim, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	// Another base: the same layers under another config.
	lp, _ := layout.FromPath(dir)
	img, err := lp.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.Env = append(cf.Config.Env, "LANG=C.UTF-8")
	other, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	otherDir := copyDir(t, dir)
	olp, _ := layout.FromPath(otherDir)
	if err := olp.AppendImage(other); err != nil {
		t.Fatal(err)
	}
	od, _ := other.Digest()
	for _, c := range []struct {
		name string
		bc   buildCase
	}{
		{"shim", buildCase{shim: shim}},
		{"wheel", buildCase{wheel: fx.Scripts.Path}},
		{"base", buildCase{base: LayoutPrefix + otherDir + "@" + od.String()}},
		{"bytecode (--no-compile)", buildCase{noCompile: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.bc.out = filepath.Join(t.TempDir(), "oci")
			if d := build(t, c.bc).Digest; d == first {
				t.Errorf("another %s, the same digest %s", c.name, d)
			}
		})
	}
}

package image

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestLayersNoSpace: a build whose store's file system fills while it
// writes a layer into its staging (a real small tmpfs; a cruxshim too
// large for it) fails as every other write to a full store does (a
// *store.SpaceError: exit 1, not a refusal) saying the store is full and
// to free space on its file system; the staging is gone. It said
// "cruxshim PATH: write …/shim.tar.gz: no space left on device", as if
// the cruxshim given were at fault, and nothing of what to do (found
// walking docs/ci.md with the store on a 2 MiB tmpfs).
func TestLayersNoSpace(t *testing.T) {
	home := filepath.Join(testdir.Tmpfs(t, "8m"), "home")
	st, err := store.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	o := echoOptions(t)
	o.Root = pipelinetest.OpenRoot(t, st, fx.Echo.Path)
	o.Output = filepath.Join(t.TempDir(), "out")
	// cruxshim, and 12 MiB that do not compress after it: still an ELF
	// executable for the platform, whose layer outgrows the tmpfs.
	shim := filepath.Join(t.TempDir(), "cruxshim")
	src, err := os.Open(testShim(t))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(shim, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if _, err := io.CopyN(dst, rand.Reader, 12<<20); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	o.Shims = map[string]string{"": shim}
	_, err = Build(context.Background(), st, o)
	var se *store.SpaceError
	if !errors.As(err, &se) || refusal.CodeOf(err) != "" || !strings.HasPrefix(err.Error(), "no space left for the store "+home+": writing the cruxshim layer") ||
		!strings.Contains(err.Error(), "free space on its file system") {
		t.Fatalf("%v (code %q)", err, refusal.CodeOf(err))
	}
	if _, err := os.Lstat(o.Output); err == nil {
		t.Error("the layout was written")
	}
	if left, _ := filepath.Glob(filepath.Join(home, "tmp", "*")); len(left) > 0 {
		t.Errorf("staging left: %v", left)
	}
}

package image

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestLayoutNoSpace: a build into a layout on a full disk (a real small
// tmpfs) fails as the store's full disk does (DESIGN §2: a failure, exit
// 1, not a refusal: neither the image nor its inputs are at fault) with a
// message that says the layout's file system is full and to free space
// there; a new layout is removed, a previous one keeps its index.json,
// and no temp file is left. Before, it said only "write …/.tmp-…: no
// space left on device".
func TestLayoutNoSpace(t *testing.T) {
	dir := testdir.Tmpfs(t, "4m")
	st, o := echoBuild(t)
	old := filepath.Join(dir, "old")
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if err := writeLayout(context.Background(), old, img, d, "one", nil, nil); err != nil {
		t.Fatal(err)
	}
	index0, err := os.ReadFile(filepath.Join(old, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{filepath.Join(dir, "new"), old} {
		o.Output = out
		_, err := Build(context.Background(), st, o)
		if err == nil || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), "no space left on the file system of the layout "+out) || !strings.Contains(err.Error(), "free space there") {
			t.Errorf("%s: %v (code %q)", out, err, refusal.CodeOf(err))
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "new")); err == nil {
		t.Error("the new layout a failed build began is left")
	}
	if b, _ := os.ReadFile(filepath.Join(old, "index.json")); !bytes.Equal(b, index0) {
		t.Errorf("the previous layout's index.json changed: %s", b)
	}
	tmps, _ := filepath.Glob(filepath.Join(old, "blobs", "sha256", tempPrefix+"*"))
	if len(tmps) > 0 {
		t.Errorf("temps left: %v", tmps)
	}
}

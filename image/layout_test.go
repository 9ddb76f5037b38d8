package image

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// randomLayout writes a random image of two layers to a new layout dir,
// tagged "one", and returns the dir, the image and its index.json.
func randomLayout(t *testing.T) (string, v1.Image, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	if err := writeLayout(context.Background(), dir, img, d, "one", nil, nil); err != nil {
		t.Fatal(err)
	}
	index0, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	return dir, img, index0
}

// TestLayoutWriter: what the layout writer leaves behind. A reader that
// gives other bytes than a blob's digest leaves no blob, no temp file
// and the old index.json; a blob already there with other bytes of the
// right size (a crash before its pages reached the disk) is rewritten,
// not trusted for its name and size as go-containerregistry's writer
// does; a second write replaces the ref name's entry instead of adding
// one; and go-containerregistry reads the result back.
func TestLayoutWriter(t *testing.T) {
	dir, img, index0 := randomLayout(t)
	d, _ := img.Digest()

	w, err := newLayoutWriter(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	bogus := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	err = w.blob(bogus, 5, func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("other")), nil })
	if err == nil || !strings.Contains(err.Error(), "the bytes given are") {
		t.Fatalf("a blob of other bytes: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", "sha256", bogus.Hex)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused blob is there: %v", err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", ".tmp-*")); len(tmp) != 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "index.json")); string(b) != string(index0) {
		t.Errorf("index.json changed by a failed write")
	}

	// A layer blob of the right size with zeros in it is rewritten.
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	blob := filepath.Join(dir, "blobs", "sha256", ld.Hex)
	fi, _ := os.Stat(blob)
	if err := os.WriteFile(blob, make([]byte, fi.Size()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(context.Background(), dir, img, d, "one", nil, nil); err != nil {
		t.Fatal(err)
	}
	if ms := indexEntries(t, dir); len(ms) != 1 || ms[0].Digest != d || ms[0].Annotations[refNameAnnotation] != "one" {
		t.Fatalf("index.json after a rewrite: %+v", ms)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := lp.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := verifiedLayer(back, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Errorf("the rewritten blob: %v", err)
	}
	rc.Close()
	if fi, _ := os.Stat(blob); fi.Mode().Perm() != 0o644 {
		t.Errorf("blob mode %v", fi.Mode())
	}

	// Another image under the same name replaces it; a second name adds one.
	img2, _ := random.Image(1024, 1)
	d2, _ := img2.Digest()
	if err := writeLayout(context.Background(), dir, img2, d2, "one", []tagged{{tag: "sig", img: img}}, nil); err != nil {
		t.Fatal(err)
	}
	ms := indexEntries(t, dir)
	names := map[string]v1.Hash{}
	for _, m := range ms {
		names[m.Annotations[refNameAnnotation]] = m.Digest
	}
	if len(ms) != 2 || names["one"] != d2 || names["sig"] != d {
		t.Errorf("index.json: %v", names)
	}
}

// TestLayoutOneImageTwoTags: the same image written under two tags (a
// release built as 1.0, then as latest: one digest, the build being
// reproducible) is in index.json under both, as a registry keeps both
// tags; written again under one, it is not duplicated. The second write
// dropped the first tag's entry by its digest: oci:DIR:1.0 was gone
// (found walking docs/ci.md, "every job's image ends in DIR/index.json
// under its name").
func TestLayoutOneImageTwoTags(t *testing.T) {
	dir, img, _ := randomLayout(t) // under "one"
	d, _ := img.Digest()
	for _, tag := range []string{"two", "one"} {
		if err := writeLayout(context.Background(), dir, img, d, tag, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var tags []string
	for _, m := range indexEntries(t, dir) {
		if m.Digest != d {
			t.Errorf("an entry of %s", m.Digest)
		}
		tags = append(tags, m.Annotations[refNameAnnotation])
	}
	if strings.Join(tags, ",") != "two,one" {
		t.Errorf("tags in index.json: %v, want two,one", tags)
	}
}

// indexEntries are the entries of the layout dir's index.json.
func indexEntries(t *testing.T, dir string) []v1.Descriptor {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ix.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests
}

// verifiedLayer opens layer i of img, rehashed as it is read.
func verifiedLayer(img v1.Image, i int) (io.ReadCloser, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	d, _ := layers[i].Digest()
	size, _ := layers[i].Size()
	rc, err := layers[i].Compressed()
	if err != nil {
		return nil, err
	}
	return verifyReader(rc, d, size), nil
}

// TestOutputNotALayout: a layout is written into a path that does not
// exist, an empty directory, an OCI image layout, or what a writer killed
// before its oci-layout file left; never into a directory of other files
// (a project's, a mistyped path), which was written into as it was, the
// blobs, index.json and oci-layout among its files. Nor is a build of
// one started (Build refuses it before anything is built), and the
// directory is left as it was.
func TestOutputNotALayout(t *testing.T) {
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	write := func(dir string) error { return writeLayout(context.Background(), dir, img, d, "one", nil, nil) }
	parent := t.TempDir()
	for _, c := range []struct {
		name  string
		setup func(dir string)
		ok    bool
	}{
		{"missing", func(string) {}, true},
		{"empty", func(dir string) { os.Mkdir(dir, 0o755) }, true},
		{"a layout", func(dir string) {
			if err := write(dir); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a killed writer's", func(dir string) { os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755) }, true},
		{"other files", func(dir string) {
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "README.md"), []byte("mine\n"), 0o644)
			os.Mkdir(filepath.Join(dir, "src"), 0o755)
		}, false},
		{"other files beside blobs", func(dir string) {
			os.MkdirAll(filepath.Join(dir, "blobs"), 0o755)
			os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
		}, false},
		{"a file", func(dir string) { os.WriteFile(dir, []byte("x"), 0o644) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(parent, strings.ReplaceAll(c.name, " ", "-"))
			c.setup(dir)
			before := listTree(t, dir)
			err := write(dir)
			if c.ok {
				if err != nil {
					t.Fatalf("writeLayout: %v", err)
				}
				if _, err := layout.FromPath(dir); err != nil {
					t.Fatalf("not a layout after: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "name a new or empty directory, or an OCI image layout") {
				t.Fatalf("writeLayout: %v", err)
			}
			if after := listTree(t, dir); after != before {
				t.Fatalf("the directory was changed:\n%s\nwas\n%s", after, before)
			}
			if _, err := Build(context.Background(), nil, Options{Platforms: []string{testPlatform}, Output: dir, BuilderID: "https://ci.example/builder"}); err == nil || err.Error() != CheckOutput(dir).Error() {
				t.Fatalf("Build: %v", err)
			}
		})
	}
}

// listTree lists the paths under root (root itself included), "" when
// there is nothing at root.
func listTree(t *testing.T, root string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return strings.Join(out, "\n")
}

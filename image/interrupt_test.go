package image

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/store"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestBuildInterruptedWhileLayering: a signal that comes while the env
// layer is compressed stops the build there (found by SIGINT to image
// build ~2 s into a cold build: it compressed the layer, signed and wrote
// the image and exited 0, a second after the signal). Nothing is written
// to the output layout, and the store's staging and layer cache hold no
// temp.
func TestBuildInterruptedWhileLayering(t *testing.T) {
	fx, client := testIndex(t)
	dir, h := testBase(t)
	home := t.TempDir()
	st, err := store.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "oci")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	layering := false
	_, err = Build(ctx, st, Options{
		Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path), Platforms: []string{testPlatform},
		Client: client, Base: LayoutPrefix + dir + "@" + h.String(), Shims: map[string]string{"": testShim(t)},
		Epoch: time.Unix(1700000000, 0), Tool: testTool, BuilderID: "https://ci.example/builder", Output: out, NoCompile: true,
		Progress: func(stage, _ string) {
			if stage == "layers" {
				layering = true
				cancel()
			}
		},
	})
	if !layering {
		t.Fatal("no layers stage")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Build cancelled while layering: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the output layout was written: %v", err)
	}
	for _, d := range []string{store.TmpDir, store.ImageLayersDir} {
		if ents, _ := os.ReadDir(filepath.Join(home, d)); len(ents) != 0 {
			t.Errorf("%s holds %v", d, ents)
		}
	}
}

// TestLayoutWriterInterruptedAndDebris: a cancelled write leaves the
// layout's index.json and no temp; a blob temp a killed writer left (no
// flock on it) is removed by the next writer, one a live writer holds is
// not.
func TestLayoutWriterInterruptedAndDebris(t *testing.T) {
	dir, _, index0 := randomLayout(t)
	blobs := filepath.Join(dir, "blobs", "sha256")
	dead := filepath.Join(blobs, tempPrefix+strings.Repeat("cd", 32)+"-1")
	os.WriteFile(dead, []byte("half a layer"), 0o600)
	held := filepath.Join(blobs, tempPrefix+strings.Repeat("ef", 32)+"-2")
	os.WriteFile(held, []byte("being written"), 0o600)
	hf, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := unix.Flock(int(hf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	img2, _ := random.Image(1<<20, 1)
	d2, _ := img2.Digest()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := writeLayout(ctx, dir, img2, d2, "one", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled write: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "index.json")); string(b) != string(index0) {
		t.Error("index.json changed by a cancelled write")
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead writer's temp is left: %v", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("a live writer's temp was removed: %v", err)
	}
	// Cancelled in the middle of a blob's bytes: its temp goes.
	ctx, cancel = context.WithCancel(context.Background())
	w, err := newLayoutWriter(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img2.Layers()
	ld, _ := layers[0].Digest()
	size, _ := layers[0].Size()
	err = w.blob(ld, size, func() (io.ReadCloser, error) {
		rc, err := layers[0].Compressed()
		return cancelAfter{rc, cancel}, err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled within a blob: %v", err)
	}
	ents, _ := os.ReadDir(blobs)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) && filepath.Join(blobs, e.Name()) != held {
			t.Errorf("temp left: %s", e.Name())
		}
		if e.Name() == ld.Hex {
			t.Errorf("the cancelled blob got its name")
		}
	}
}

// TestBuildCleansKilledBuildsDebris: a build whose env layer comes from
// the cache (no fetch runs) still removes what a killed build left in the
// store's staging (found by SIGKILLing image build: its staging, and the
// half-compressed layer it wrote beside the cache, stayed after the next
// builds); a cancelled write into a layout that did not exist leaves no
// directory.
func TestBuildCleansKilledBuildsDebris(t *testing.T) {
	home := t.TempDir()
	build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci"), noCompile: true})
	dead := filepath.Join(home, store.TmpDir, "image-123")
	os.MkdirAll(filepath.Join(dead, "0"), 0o700)
	os.WriteFile(filepath.Join(dead, "0", "env.tar.gz"), []byte("half a layer"), 0o600)
	os.WriteFile(dead+".lock", nil, 0o600) // its owner is gone: nobody holds it
	again := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci"), noCompile: true})
	if again.Timings.CachedLayers != 1 {
		t.Fatalf("the rebuild missed the layer cache: %+v", again.Timings)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, store.TmpDir)); len(ents) != 0 {
		t.Errorf("staging left: %v", ents)
	}
	ents, _ := os.ReadDir(filepath.Join(home, store.ImageLayersDir))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tar.gz") && !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("the layer cache holds %s", e.Name())
		}
	}

	img, _ := random.Image(1024, 1)
	d, _ := img.Digest()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fresh := filepath.Join(t.TempDir(), "new")
	if err := writeLayout(ctx, fresh, img, d, "one", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled write: %v", err)
	}
	if _, err := os.Lstat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cancelled write left the layout it made: %v", err)
	}
}

// cancelAfter cancels its context after the first read.
type cancelAfter struct {
	io.ReadCloser
	cancel func()
}

func (c cancelAfter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.cancel()
	return n, err
}

package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestRootWheelMemory: reading a root wheel that ships a model (a 96 MiB
// stored member) and building its env allocate a small fraction of its
// size: the wheel is copied into the store while hashed, never held in
// memory. Before, Source took the wheel's bytes: a caller read it whole
// (and the CLI's read doubled its buffer as it grew).
func TestRootWheelMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 96 MiB wheel")
	}
	const size = 96 << 20
	fx, c, st, py := setup(t)
	big, err := fixtures.WithLargeMember(t.TempDir(), fx.Echo, size)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	root := pipelinetest.OpenRoot(t, st, big.Path)
	r, err := pipeline.Run(ctx, st, pipeline.Options{Source: pipeline.Source{Root: root}, Platform: "host", Python: py, Client: c, NoCompile: true})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Root.SHA256 != big.SHA256 || r.Root.Size != big.Size {
		t.Fatalf("root %+v, want %s of %d bytes", r.Root, big.SHA256, big.Size)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MB to read and install a root wheel of %d MB", got/1e6, big.Size/1e6)
	if got > size/4 {
		t.Errorf("allocated %d bytes to read and install a root wheel of %d", got, big.Size)
	}
}

// TestRootWheelIsTheCopyRead: once OpenRoot has read a root wheel, what
// becomes of its file (rewritten in place with another provider's wheel)
// changes nothing: the env installs, the store keeps and the result names
// the bytes that were hashed and whose manifest was read.
func TestRootWheelIsTheCopyRead(t *testing.T) {
	fx, c, st, py := setup(t)
	echo, err := os.ReadFile(fx.Echo.Path)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(fx.Native.Path)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fx.Echo.Filename)
	if err := os.WriteFile(path, echo, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := pipeline.OpenRoot(context.Background(), st, f, fx.Echo.Filename, digest.Digest{})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// The same inode, other bytes: what a file swapped under an open
	// descriptor would be.
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.Run(context.Background(), st, pipeline.Options{Source: pipeline.Source{Root: root}, Platform: "host", Python: py, Client: c, NoCompile: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Root.SHA256 != fx.Echo.SHA256 || r.Manifest.Name != fx.Echo.Name || r.Env.Seal.Materialization.Root.SHA256 != fx.Echo.SHA256 {
		t.Fatalf("the env names root %+v (manifest %s), sealed %+v; want %s's bytes", r.Root, r.Manifest.Name, r.Env.Seal.Materialization.Root, fx.Echo.Filename)
	}
	stored, err := os.ReadFile(st.Path(fx.Echo.SHA256))
	if err != nil || !bytes.Equal(stored, echo) {
		t.Fatalf("the store's root wheel is not the bytes read: %v", err)
	}
	if ok, _ := st.Has(fx.Native.SHA256); ok {
		t.Error("the bytes written after the read were stored")
	}
	// The env holds the echo's package, not the other's.
	if pkgs, _ := filepath.Glob(filepath.Join(r.Env.Dir, "lib", "python*", "site-packages", "acme_echo")); len(pkgs) != 1 {
		t.Errorf("the env lacks acme_echo: %v", pkgs)
	}
}

// TestRootWheelLeavesNothing: a root wheel refused, or read and closed
// without a Run that builds an env (fetch, a plan), leaves nothing in
// the store; one an env installed is the store's blob, with no temp.
func TestRootWheelLeavesNothing(t *testing.T) {
	fx, c, st, py := setup(t)
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	notZip := filepath.Join(t.TempDir(), fx.Echo.Filename)
	if err := os.WriteFile(notZip, []byte("not a zip archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		path string
		sum  digest.Digest
		want error
	}{
		{"other sha256", ctx, fx.Echo.Path, digest.Sum([]byte("other")), refusal.HashMismatch},
		{"not a wheel", ctx, notZip, digest.Digest{}, refusal.WheelInvalid},
		{"no manifest", ctx, fx.Runtime.Path, digest.Digest{}, refusal.ManifestMissing},
		{"cancelled", cancelled, fx.Echo.Path, digest.Digest{}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			root, err := pipeline.OpenRoot(tc.ctx, st, f, filepath.Base(tc.path), tc.sum)
			if root != nil || !errors.Is(err, tc.want) {
				t.Fatalf("OpenRoot: %v, want %v", err, tc.want)
			}
			if blobs := blobNames(t, st); len(blobs) != 0 {
				t.Errorf("left in the store: %v", blobs)
			}
		})
	}
	// otherRoot reads the echo provider's root wheel into a store of its own.
	otherRoot := func(t *testing.T) (*store.Store, *pipeline.RootWheel) {
		other, err := store.Open(filepath.Join(testdir.New(t), "home"))
		if err != nil {
			t.Fatal(err)
		}
		return other, pipelinetest.OpenRoot(t, other, fx.Echo.Path)
	}
	// run runs the pipeline on root into a store: an env, or fetch only.
	run := func(into *store.Store, root *pipeline.RootWheel, fetchOnly bool) (*pipeline.Result, error) {
		return pipeline.Run(ctx, into, pipeline.Options{Source: pipeline.Source{Root: root}, Platform: "host", Python: py, Client: c, NoCompile: true, FetchOnly: fetchOnly})
	}
	t.Run("fetch", func(t *testing.T) {
		root := pipelinetest.OpenRoot(t, st, fx.Echo.Path)
		if _, err := run(st, root, true); err != nil {
			t.Fatalf("Run: %v", err)
		}
		root.Close()
		for _, b := range blobNames(t, st) {
			if b == fx.Echo.SHA256.Hex() || strings.HasPrefix(b, ".") {
				t.Errorf("fetch left %s in the store", b)
			}
		}
	})
	t.Run("env", func(t *testing.T) {
		root := pipelinetest.OpenRoot(t, st, fx.Echo.Path)
		if _, err := run(st, root, false); err != nil {
			t.Fatalf("Run: %v", err)
		}
		root.Close()
		if ok, _, err := st.Check(fx.Echo.SHA256); !ok || err != nil {
			t.Errorf("the root wheel is not the store's: %v", err)
		}
		for _, b := range blobNames(t, st) {
			if strings.HasPrefix(b, ".") {
				t.Errorf("left in the store: %s", b)
			}
		}
	})
	t.Run("closed", func(t *testing.T) {
		// A RootWheel closed before its run: the run fails, naming it,
		// rather than install a root it no longer has a copy of.
		other, root := otherRoot(t)
		root.Close()
		if _, err := run(other, root, false); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a closed root wheel: %v", err)
		}
		if blobs := blobNames(t, other); len(blobs) != 0 {
			t.Errorf("left in the store: %v", blobs)
		}
	})
	t.Run("another store", func(t *testing.T) {
		other, root := otherRoot(t)
		if _, err := run(st, root, false); err == nil || !strings.Contains(err.Error(), other.Home()) {
			t.Errorf("a root wheel of another store: %v", err)
		}
	})
}

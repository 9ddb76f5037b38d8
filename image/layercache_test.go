package image

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/store"
)

// TestLayerCache: a rebuild in the same home takes the env layer from the
// store's layer cache (no materialization) and gives the same digest; so
// does a build that skips the cache, and one after the cached layer was
// damaged (the damaged entry is a miss, rebuilt and replaced, never used);
// another epoch is another entry; gc removes them all.
func TestLayerCache(t *testing.T) {
	home := t.TempDir()
	first := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")})
	if first.Timings.CachedLayers != 0 || first.Timings.Materialize == 0 {
		t.Fatalf("first build: %+v", first.Timings)
	}
	again := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")})
	if again.Timings.CachedLayers != 1 || again.Timings.Materialize != 0 || again.Digest != first.Digest {
		t.Fatalf("rebuild: %+v, %s vs %s", again.Timings, again.Digest, first.Digest)
	}
	fresh := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci"), noCache: true})
	if fresh.Timings.CachedLayers != 0 || fresh.Digest != first.Digest {
		t.Fatalf("--no-cache: %+v, %s", fresh.Timings, fresh.Digest)
	}

	layers, _ := filepath.Glob(filepath.Join(home, store.ImageLayersDir, "*.tar.gz"))
	if len(layers) != 1 {
		t.Fatalf("cache entries: %v", layers)
	}
	b, err := os.ReadFile(layers[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(layers[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	healed := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")})
	if healed.Timings.CachedLayers != 0 || healed.Digest != first.Digest {
		t.Fatalf("after damage: %+v, %s", healed.Timings, healed.Digest)
	}
	if again := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")}); again.Timings.CachedLayers != 1 || again.Digest != first.Digest {
		t.Fatalf("the rewritten entry: %+v", again.Timings)
	}

	// An interpreter updated in place since (same path and version, other
	// bytes: here, the entry's seal says other bytes) is a miss.
	entries, _ := filepath.Glob(filepath.Join(home, store.ImageLayersDir, "*.json"))
	if len(entries) != 1 {
		t.Fatalf("cache entries: %v", entries)
	}
	raw, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	e["seal"].(map[string]any)["interpreter"].(map[string]any)["sha256"] = "sha256:" + strings.Repeat("0", 64)
	if raw, err = json.Marshal(e); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entries[0], raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if again := build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")}); again.Timings.CachedLayers != 0 || again.Digest != first.Digest {
		t.Fatalf("an entry sealed with another interpreter: %+v, %s", again.Timings, again.Digest)
	}

	st, err := store.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.GC(context.Background(), store.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(home, store.ImageLayersDir))
	if len(left) != 0 || len(rep.Removed) < 2 {
		t.Errorf("after gc: %v left, removed %v", left, rep.Removed)
	}
}

// TestLayerCacheModes: the layer cache's two files of an entry have one
// mode, 0644, as the store's other cache entries that are replaced by a
// rename (cache/image-base-v1, the probe cache; docs/store.md): the
// layer was 0600 (the build's staging file, renamed as it was) beside
// its .json of 0644.
func TestLayerCacheModes(t *testing.T) {
	home := t.TempDir()
	build(t, buildCase{home: home, out: filepath.Join(t.TempDir(), "oci")})
	ents, err := os.ReadDir(filepath.Join(home, store.ImageLayersDir))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", e.Name(), fi.Mode().Perm())
		}
		kinds[filepath.Ext(e.Name())] = true
	}
	if !kinds[".gz"] || !kinds[".json"] {
		t.Fatalf("cache entries: %v", ents)
	}
}

package pipeline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestRootInItsOwnLockRefused: a root wheel whose embedded lock lists the
// provider itself (DESIGN §3: "The root distribution itself is not in its
// own lock") is refused lock_invalid by the pipeline, before anything is
// resolved, fetched or built. package embed and inspect refused such a
// lock, but a wheel embedded by hand reached install unchecked: the root
// resolved as a dependency of itself (its name in the resolution and so
// in the resolution digest), from a lock URL the pinned index never vouched for.
func TestRootInItsOwnLockRefused(t *testing.T) {
	dir := testdir.New(t)
	const mf = `schema = 1
name = "acme-web-fetch"
protocol = [1, 1]

[[entrypoints]]
name = "fetch"
object = "acme_web_fetch.impl:Fetch"
interface = { id = "web.fetch", digest = "sha256:5f17d3aafa95a59a05c1abece31b23a7a0e003f715ee229f6ea3d089ea5c41e2" }
`
	const lock = `lock-version = "1.0"
created-by = "hand"

[[packages]]
name = "Acme_Web.Fetch"
version = "0.9.0"
wheels = [{ url = "https://x/acme_web_fetch-0.9.0-py3-none-any.whl", hashes = { sha256 = "8b6deb8bc45804aad0ff783fac88426dd8dadd7ea98f3cdeb0c626e286dcde0d" } }]
`
	w := wheeltest.Write(t, dir, "acme_web_fetch-1.0.0-py3-none-any.whl", map[string]string{
		"acme_web_fetch/__init__.py": "",
		"DI/cruxible/provider.toml":  mf,
		"DI/cruxible/pylock.toml":    lock,
	})
	st, err := store.Open(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	root := pipelinetest.OpenRoot(t, st, w)
	for _, resolveOnly := range []bool{true, false} {
		_, err := pipeline.Run(context.Background(), st, pipeline.Options{Source: pipeline.Source{Root: root}, Platform: "cp312-manylinux_2_28_x86_64", ResolveOnly: resolveOnly, FetchOnly: !resolveOnly})
		if refusal.CodeOf(err) != refusal.LockInvalid || !strings.Contains(err.Error(), "lists acme-web-fetch, the provider itself") {
			t.Fatalf("resolve only %v: got %v, want lock_invalid naming the provider itself", resolveOnly, err)
		}
	}
}

package image

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestBuildWithoutRuntimeRefused: the image of a provider whose lock
// resolves no runtime (cruxible-provider-runtime) would have no harness
// module, and every run of it is refused runtime_missing (pinned/container,
// from its provenance; DESIGN §10). Build refuses it so, before it reads
// the base or writes or pushes anything: the registry the base and the
// push name gets no request, and the layout is not made. It was built,
// signed, written and pushed, an image that could never run.
func TestBuildWithoutRuntimeRefused(t *testing.T) {
	bare, err := fixtures.BuildBare(t.TempDir(), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "oci")
	_, err = Build(context.Background(), st, Options{
		Root: pipelinetest.OpenRoot(t, st, bare.Path), Platforms: []string{testPlatform},
		Base:  host + "/debian@sha256:" + strings.Repeat("ab", 32),
		Shims: map[string]string{"": testShim(t)}, Epoch: time.Unix(1700000000, 0), Key: testKey(t),
		BuilderID: "https://ci.example/builder", Tool: testTool,
		Output: out, Push: host + "/acme/bare:1.0.0",
	})
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.RuntimeMissing {
		t.Fatalf("Build of a provider without the runtime: %v, want refused %s", err, refusal.RuntimeMissing)
	}
	for _, want := range []string{"cruxible-provider-runtime", testPlatform, filepath.Base(bare.Path), "docs/provider-authors.md"} {
		if !strings.Contains(re.Detail, want) {
			t.Errorf("the refusal %q does not name %s", re.Detail, want)
		}
	}
	if strings.Contains(re.Detail, "\n") {
		t.Errorf("the refusal is more than one line: %q", re.Detail)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the registry got %d requests before the refusal, want none", n)
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the layout %s was made (%v)", out, err)
	}
}

package image

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/cruxible/cruxprov/refusal"
)

// TestPushMergeBounded: the .sig and .att tags a push adds to are read
// from the registry, which is not trusted with this host's memory: a
// manifest under the tag whose config claims gigabytes (or no size, -1)
// and a config blob that never ends are refused after a bounded read,
// not read until the registry stops. Before, go-containerregistry read
// the whole config into memory to add the new signature to it (the
// loopback registry below stops at 64 MiB; a hostile one never does).
func TestPushMergeBounded(t *testing.T) {
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(mem.Close)
	sig := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.sig$`)
	const cfg = "sha256:" + "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	var size atomic.Int64
	var sent atomic.Int64
	repo := inFront(t, mem.URL, func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && sig.MatchString(r.URL.Path):
			m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":%d,"digest":"%s"},"layers":[]}`, size.Load(), cfg)
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
			w.Header().Set("Content-Length", fmt.Sprint(len(m)))
			if r.Method == http.MethodGet {
				w.Write([]byte(m))
			}
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+cfg):
			buf := make([]byte, 64<<10)
			for sent.Load() < 64<<20 {
				n, err := w.Write(buf)
				sent.Add(int64(n))
				if err != nil {
					return true
				}
			}
		default:
			return false
		}
		return true
	}) + "/acme/echo"
	st, o := echoBuild(t)
	o.Push = repo
	for _, claimed := range []int64{8 << 30, -1} {
		size.Store(claimed)
		sent.Store(0)
		_, err := Build(context.Background(), st, o)
		t.Logf("config of %d bytes claimed: %d sent: %v", claimed, sent.Load(), err)
		if refusal.CodeOf(err) != refusal.PushFailed || !strings.Contains(err.Error(), "the push to the registry ") {
			t.Errorf("config of %d bytes claimed: %v, want push_failed saying the push failed", claimed, err)
		}
		if sent.Load() > 2*maxManifest {
			t.Errorf("config of %d bytes claimed: %d bytes of it read", claimed, sent.Load())
		}
	}
}

package image

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/refusal"
)

// TestBaseRegistryDownMidBuild: a registry base whose registry stops, or
// cuts a layer short, once the build has read its manifest (the layout
// writer and the push read its layers later) is fetch_failed naming the
// base and what to do. Walking images.md with a docker-registry stopped
// mid-build, the build failed "cannot write the layout DIR: Get …:
// connection refused" (or "blob sha256:…: unexpected EOF"), exit 1,
// blaming the layout and saying nothing of the registry.
func TestBaseRegistryDownMidBuild(t *testing.T) {
	img, d, _ := randomBaseLayout(t)
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer mem.Close()
	upstream, _ := url.Parse(mem.URL)
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	var cut atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Load() && strings.Contains(r.URL.Path, "/blobs/") {
			// The answer's headers and a few bytes, then the connection
			// ends: a registry killed while it sent a layer.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err == nil {
				fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nContent-Type: application/octet-stream\r\n\r\nabc")
				buf.Flush()
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dst, err := name.ParseReference(host + "/debian@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img); err != nil {
		t.Fatal(err)
	}
	ref, err := ParseRef(host + "/debian@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, err error, says string) {
		t.Helper()
		if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "cannot read the base image "+ref.String()) || !strings.Contains(err.Error(), says) {
			t.Errorf("%v (code %q), want fetch_failed naming the base %s and saying %q", err, refusal.CodeOf(err), ref, says)
		}
	}
	t.Run("cut short", func(t *testing.T) {
		bs, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		if err != nil {
			t.Fatal(err)
		}
		cut.Store(true)
		defer cut.Store(false)
		err = writeLayout(context.Background(), filepath.Join(t.TempDir(), "oci"), bs.img, d, "x", nil, nil)
		check(t, err, "its registry's connection broke while a layer was read")
	})
	t.Run("stopped", func(t *testing.T) {
		bs, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		err = writeLayout(context.Background(), filepath.Join(t.TempDir(), "oci"), bs.img, d, "x", nil, nil)
		check(t, err, "nothing accepts connections there")
	})
}

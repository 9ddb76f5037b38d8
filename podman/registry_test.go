package podman

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/refusal"
)

// TestManifestReadOneLine: the container backend's read of the pinned
// manifest goes through image's registry transport, as verify's does: a
// registry's 503 page is not pasted into the refusal (and a registry
// that says nothing is bounded by the same stall deadline). Before, it
// used go-containerregistry's bare transport, so container_unavailable
// carried the page over many lines.
func TestManifestReadOneLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"))
	}))
	defer srv.Close()
	ref, err := image.ParseRef(strings.TrimPrefix(srv.URL, "http://") + "/acme/echo@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{Remote: []remote.Option{remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2})}}
	_, err = e.manifest(context.Background(), ref)
	if refusal.CodeOf(err) != refusal.ContainerUnavailable {
		t.Fatalf("got %v, want container_unavailable", err)
	}
	if msg := err.Error(); strings.ContainsFunc(msg, unicode.IsControl) || strings.Contains(msg, "<") || !strings.Contains(msg, "503") {
		t.Fatalf("refusal %q: want one line naming the status, without the page", msg)
	}
}

// TestParseState: only "false" (a start time that is not zero) says the
// container started; anything else podman might answer is not a start.
func TestParseState(t *testing.T) {
	for _, c := range []struct {
		out         string
		code        int
		started, ok bool
	}{
		{"0 false\n", 0, true, true},
		{"137 false", 137, true, true},
		{"0 true", 0, false, true},
		{"0 <no value>", 0, false, false},
		{"0 False", 0, false, false},
		{"x false", 0, false, false},
		{"0", 0, false, false},
		{"", 0, false, false},
		{"0 false extra", 0, false, false},
	} {
		t.Run(c.out, func(t *testing.T) {
			code, started, ok := parseState([]byte(c.out))
			if code != c.code || started != c.started || ok != c.ok {
				t.Fatalf("parseState(%q) = %d %v %v, want %d %v %v", c.out, code, started, ok, c.code, c.started, c.ok)
			}
		})
	}
}

// TestPullDeadlineSaysSo: podman pull has a deadline of its own
// (pullTimeout, 20 minutes: an image's layers over a slow link take longer
// than the two minutes of a podman command, which a run's first pull of a
// large image never finished in), and a pull killed at it is
// container_unavailable saying so. Before, it said "podman pull: " and
// nothing else: podman --quiet writes nothing when killed. The registry
// here accepts the connection and says nothing.
func TestPullDeadlineSaysSo(t *testing.T) {
	usable(t)
	defer func(d time.Duration) { pullTimeout = d }(pullTimeout)
	pullTimeout = 2 * time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(io.Discard, c) }()
		}
	}()
	ref, err := image.ParseRef(l.Addr().String() + "/acme/echo@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = (&Executor{}).pull(context.Background(), ref, &v1.Manifest{})
	if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "podman pull did not finish in 2s (killed): check the registry and the network to it") {
		t.Fatalf("a pull from a registry that says nothing: %v after %v; want container_unavailable saying it did not finish", err, time.Since(start))
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the pull took %v past its deadline of %v", d, pullTimeout)
	}
}

package image

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// nginx503 is what a reverse proxy answers when the registry behind it is
// down.
const nginx503 = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n" +
	"<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n"

// TestRegistryErrorBodyOneLine: a registry's (or its proxy's) error
// answer is not pasted into the refusal: an HTML page is left out (the
// status line says it), a text body is cut to a short line without
// control characters, and a registry error's message is one short line.
// Before, go-containerregistry's error carried up to 64 KiB of the body,
// so `refused: fetch_failed: …` printed nginx's page over many lines.
func TestRegistryErrorBodyOneLine(t *testing.T) {
	keys := []*sign.PublicKey{testKey(t).Public()}
	pinned := "/acme/echo@sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		says                    string
	}{
		{"nginx 503", "text/html", nginx503, http.StatusServiceUnavailable, "503 Service Unavailable"},
		{"html without a content type", "", "\n  <!DOCTYPE html>\n<html><body>down</body></html>", http.StatusBadGateway, "502 Bad Gateway"},
		{"text", "text/plain", "upstream connect error\x1b[31m or disconnect\r\nreset reason: overflow\n" + strings.Repeat("x", 4096), http.StatusServiceUnavailable, "upstream connect error or disconnect"},
		{"registry error", "application/json", `{"errors":[{"code":"UNAVAILABLE","message":"storage down:\n<html>\n` + strings.Repeat("y", 4096) + `","detail":"line one\nline two"}]}`, http.StatusServiceUnavailable, "UNAVAILABLE: storage down:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v2/" {
					return
				}
				if c.contentType != "" {
					w.Header().Set("Content-Type", c.contentType)
				}
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			t.Cleanup(srv.Close)
			fast := remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2})
			_, err := Verify(context.Background(), strings.TrimPrefix(srv.URL, "http://")+pinned, VerifyOptions{Keys: keys, Remote: []remote.Option{fast}})
			if refusal.CodeOf(err) != refusal.FetchFailed {
				t.Fatalf("got %v, want fetch_failed", err)
			}
			msg := err.Error()
			t.Logf("%s", msg)
			if strings.ContainsFunc(msg, unicode.IsControl) || strings.Contains(msg, "<") || len(msg) > 1024 || !strings.Contains(msg, c.says) {
				t.Fatalf("refusal %q: want one short line without HTML or control characters, saying %q", msg, c.says)
			}
			// A registry that answered is not said to be out of reach.
			if strings.Contains(msg, "not reached") || !strings.Contains(msg, fmt.Sprintf("the registry answered HTTP %d", c.status)) {
				t.Fatalf("refusal %q: want it to say the registry answered %d, not that it was not reached", msg, c.status)
			}
		})
	}
}

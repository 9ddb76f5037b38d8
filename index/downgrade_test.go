package index

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestRedirectToPlainHTTPRefused: an https index that redirects to plain
// http on its own host, port and path prefix has left the pinned index
// (DESIGN §4: a redirect that leaves the index's base URL is
// index_not_pinned): its page or file is refused, and nothing is sent in
// plain text, the index's credentials least of all. A redirect within the
// index was tested over plain http only, where the scheme never differs.
func TestRedirectToPlainHTTPRefused(t *testing.T) {
	// A plain listener on the address the TLS one has would be the
	// target; count what reaches any plain http listener at all.
	var plainHits atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Add(1)
		io.WriteString(w, "plain")
	}))
	defer plain.Close()
	var srvURL string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/down/":
			// The same host, port and path, downgraded.
			http.Redirect(w, r, "http://"+strings.TrimPrefix(srvURL, "https://")+"/simple/down/index.html", http.StatusFound)
		case "/simple/away/":
			// Plain http, same host, the path under /simple/.
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(plain.URL, "http://"))
			http.Redirect(w, r, "http://127.0.0.1:"+port+"/simple/away/", http.StatusFound)
		case "/simple/file/":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<a href="/simple/file/f-1.0-py3-none-any.whl">f-1.0-py3-none-any.whl</a>`)
		case "/simple/file/f-1.0-py3-none-any.whl":
			http.Redirect(w, r, "http://"+strings.TrimPrefix(srvURL, "https://")+r.URL.Path, http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	host := strings.TrimPrefix(srv.URL, "https://")
	c, err := New(srv.URL+"/simple/", Options{
		HTTPClient:  &http.Client{Transport: srv.Client().Transport},
		Credentials: []Credential{{Host: host, Username: "alice", Password: "s3cret"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"down", "away"} {
		if _, err := c.Project(ctx, name); refusal.CodeOf(err) != refusal.IndexNotPinned || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("page %s: got %v, want index_not_pinned", name, err)
		}
	}
	p, err := c.Project(ctx, "file")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := p.Find("f-1.0-py3-none-any.whl")
	if !ok {
		t.Fatalf("no file in %+v", p.Files)
	}
	if _, _, err := c.Open(ctx, f); refusal.CodeOf(err) != refusal.IndexNotPinned {
		t.Errorf("file: got %v, want index_not_pinned", err)
	}
	if n := plainHits.Load(); n != 0 {
		t.Errorf("%d requests reached the plain http listener", n)
	}
}

// TestCredentialsNeverSentInPlainText: an https index whose page lists a
// file at a plain http URL on a host it has a credential for (a netrc
// machine names a host, whatever the port or scheme) downloads it without
// the credential: DESIGN §14's credentials are the index's, over its
// TLS. They were sent as basic auth in clear text. The server asking for
// them gets none and answers 401, which is refused fetch_failed saying
// they were held back (not that they are wrong) and to fix the index. The
// https page itself still gets them.
func TestCredentialsNeverSentInPlainText(t *testing.T) {
	var plainAuth atomic.Value
	plainAuth.Store("")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			plainAuth.Store(a)
			io.WriteString(w, "bytes")
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer plain.Close()
	var pageAuth atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, ok := r.BasicAuth()
		pageAuth.Store(ok)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="`+plain.URL+`/f-1.0-py3-none-any.whl">f-1.0-py3-none-any.whl</a>`)
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/simple/", Options{
		HTTPClient:  &http.Client{Transport: srv.Client().Transport},
		Credentials: ParseNetrc([]byte("machine 127.0.0.1 login alice password s3cret")),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.Project(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if !pageAuth.Load() {
		t.Error("the https index's page was fetched without its credentials")
	}
	rc, _, err := c.Open(ctx, p.Files[0])
	if rc != nil {
		rc.Close()
	}
	if a := plainAuth.Load().(string); a != "" {
		t.Fatalf("credentials sent over plain http: Authorization %q", a)
	}
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "never sent without TLS") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("got %v, want fetch_failed saying the credentials were held back", err)
	}
}

package image

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestPushFailureRefused: a push the registry does not take — it is down,
// refuses the credentials, fails (5xx), or the connection is cut half-way
// through a layer's upload, after the image but before its signature, or
// after the signature but before the attestations —
// is a push_failed refusal (DESIGN §2: exit 78; it was fetch_failed, a
// fetch's code) whose detail says what to do, never a bare error
// (exit 1). What a failed push left in the registry does not verify. The
// registry is a real docker-registry behind a loopback proxy that
// misbehaves.
func TestPushFailureRefused(t *testing.T) {
	host := startDockerRegistry(t)
	key := testKey(t)
	keys := []*sign.PublicKey{key.Public()}
	st, o := echoBuild(t)
	o.Key = key
	build := func(push, out string) (*Result, error) {
		o := o
		o.Push, o.Output = push, out
		return Build(context.Background(), st, o)
	}
	// The digest every push below is of (the build is reproducible).
	ref, err := build("", filepath.Join(t.TempDir(), "oci"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	upload := regexp.MustCompile(`^/v2/.+/blobs/uploads/`)
	sig := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.sig$`)
	att := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.att$`)
	// cut reads a little of the request's body and drops the connection.
	cut := func(w http.ResponseWriter, r *http.Request) {
		io.CopyN(io.Discard, r.Body, 512)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}
	front := func(bad func(w http.ResponseWriter, r *http.Request) bool) string {
		return inFront(t, "http://"+host, bad)
	}
	// A real docker-registry in read-only maintenance mode (405 to every
	// upload: it said "the registry failed or refused the push ... run
	// the build again", which no rerun changes), and one that was
	// running and is stopped.
	readOnly := imagetest.ReadOnlyDockerRegistry(t)
	stopped := imagetest.StoppedDockerRegistry(t)
	for _, c := range []struct {
		name, host, says string
	}{
		{"registry down", closed, "not reached"},
		{"registry read-only", readOnly, "the registry takes no pushes, HTTP 405: it is read-only"},
		{"registry stopped", stopped, "nothing accepts connections there"},
		{"credentials refused", front(func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v2/" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return true
		}), "refused the credentials"},
		{"registry fails", front(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost || !upload.MatchString(r.URL.Path) {
				return false
			}
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("<html>\n<body>internal error</body>\n</html>\n"))
			return true
		}), "failed"},
		{"cut during a layer", front(func(w http.ResponseWriter, r *http.Request) bool {
			if (r.Method != http.MethodPatch && r.Method != http.MethodPut) || !upload.MatchString(r.URL.Path) || r.ContentLength == 0 {
				return false
			}
			cut(w, r)
			return true
		}), "not reached"},
		{"cut before the signature", front(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPut || !sig.MatchString(r.URL.Path) {
				return false
			}
			cut(w, r)
			return true
		}), "not reached"},
		{"cut before the attestations", front(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPut || !att.MatchString(r.URL.Path) {
				return false
			}
			cut(w, r)
			return true
		}), "not reached"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := c.host + "/acme/" + strings.ReplaceAll(c.name, " ", "-")
			start := time.Now()
			_, err := build(repo+":1.0", "")
			t.Logf("%v: %v", time.Since(start), err)
			var re *refusal.Error
			// push_failed, whose detail says first that the push failed,
			// and where.
			at := "the push to the registry " + c.host + " failed: cannot push to " + repo + ": "
			if refusal.CodeOf(err) != refusal.PushFailed || !errors.As(err, &re) || !strings.HasPrefix(re.Detail, at) || !strings.Contains(re.Detail, c.says) ||
				!strings.HasSuffix(re.Detail, "run the build again (a failed push does not move the image's tag)") && !strings.HasSuffix(re.Detail, "run the build again; a failed push does not move the image's tag)") {
				t.Fatalf("push: %v (code %q), want push_failed beginning %q, saying %q and ending \"run the build again\" (docs/images.md)", err, refusal.CodeOf(err), at, c.says)
			}
			if msg := err.Error(); strings.ContainsFunc(msg, unicode.IsControl) || strings.Contains(msg, "<") {
				t.Fatalf("push: %q: want one line without the registry's HTML", msg)
			}
			if msg, cause := err.Error(), re.Err.Error(); strings.Count(msg, cause) != 1 {
				t.Fatalf("push: %q: want the registry's answer %q said once", msg, cause)
			}
			// Whatever reached the registry is not a verified image.
			direct := host + "/acme/" + strings.ReplaceAll(c.name, " ", "-") + "@" + ref.Digest.String()
			if _, err := Verify(context.Background(), direct, VerifyOptions{Keys: keys}); err == nil {
				t.Errorf("the failed push's image verifies")
			}
		})
	}
}

package image

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestRegistryRedirectLoop: a registry (or its proxy) that redirects a
// request to itself, again and again, ends a push (push_failed) and a
// verify (fetch_failed) at once, saying the redirects go round. go-containerregistry's
// clients check a redirect only for a private host, never how many
// there were: a real docker-registry behind a loopback proxy redirecting
// the upload's POST (the push) or the manifest's GET (verify) to the same
// URL held either for ever, some 4,000 requests a second, until a signal.
func TestRegistryRedirectLoop(t *testing.T) {
	key := testKey(t)
	st, o := echoBuild(t)
	o.Key = key
	upload := regexp.MustCompile(`^/v2/.+/blobs/uploads/$`)
	manifest := regexp.MustCompile(`^/v2/.+/manifests/sha256:[0-9a-f]{64}$`)
	var loop atomic.Pointer[regexp.Regexp]
	var hits atomic.Int64
	repo := inFront(t, "http://"+startDockerRegistry(t), func(w http.ResponseWriter, r *http.Request) bool {
		if re := loop.Load(); re != nil && re.MatchString(r.URL.Path) {
			hits.Add(1)
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
			return true
		}
		return false
	}) + "/acme/echo"
	// The layers cached, so that the push below is what takes the time.
	o.Output = filepath.Join(t.TempDir(), "oci")
	if _, err := Build(context.Background(), st, o); err != nil {
		t.Fatal(err)
	}
	o.Output = ""
	refused := func(t *testing.T, what string, run func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hits.Store(0)
		start := time.Now()
		err := run(ctx)
		var re *refusal.Error
		want := refusal.FetchFailed
		if what == "a push" {
			want = refusal.PushFailed
		}
		if d := time.Since(start); d > 10*time.Second || refusal.CodeOf(err) != want || !errors.As(err, &re) ||
			!strings.Contains(err.Error(), "redirected the request more than 10 times") || !strings.Contains(re.Detail, "go round in a loop") {
			t.Fatalf("%s through a redirect loop: %v after %v and %d redirects; want %s at once, saying the redirects go round", what, err, d.Round(time.Millisecond), hits.Load(), want)
		}
	}
	t.Run("push", func(t *testing.T) {
		loop.Store(upload)
		defer loop.Store(nil)
		o := o
		o.Push = repo + ":1.0"
		refused(t, "a push", func(ctx context.Context) error { _, err := Build(ctx, st, o); return err })
	})
	t.Run("verify", func(t *testing.T) {
		o := o
		o.Push = repo + ":1.0"
		res, err := Build(context.Background(), st, o)
		if err != nil {
			t.Fatal(err)
		}
		loop.Store(manifest)
		defer loop.Store(nil)
		refused(t, "verify", func(ctx context.Context) error {
			_, err := Verify(ctx, repo+"@"+res.Digest.String(), VerifyOptions{Keys: []*sign.PublicKey{key.Public()}})
			return err
		})
	})
}

package image

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestPushInterruptedAfterLayout: with --output and --push, a signal in
// the push comes after the layout was written: Build's error is
// ErrPushInterrupted and names the layout, which holds the image whole
// under its tag, so the CLI can say so. It said "nothing partial was
// kept; blobs pushed before it stay in the registry", and nothing of the
// layout the build had written (found walking docs/ci.md: SIGINT to a
// build with both, the layout then held the image, signed, under the
// push tag).
func TestPushInterruptedAfterLayout(t *testing.T) {
	mem := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(cancel) // the push's first request: the signal
		mem.ServeHTTP(w, r)
	}))
	defer srv.Close()
	st, o := echoBuild(t)
	o.Output = filepath.Join(t.TempDir(), "oci")
	o.Push = strings.TrimPrefix(srv.URL, "http://") + "/acme/echo:1.0"
	_, err := Build(ctx, st, o)
	var pe *PushInterruptedError
	if !errors.Is(err, ErrPushInterrupted) || !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Layout != o.Output {
		t.Fatalf("%v (%#v)", err, pe)
	}
	lp, err := layout.FromPath(o.Output)
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := layoutSource(o.Output).tag(context.Background(), "1.0")
	if err != nil || !ok {
		t.Fatalf("the layout's 1.0: %v %v", ok, err)
	}
	if _, err := lp.Image(d); err != nil {
		t.Errorf("the layout's image: %v", err)
	}
	if _, err := Verify(context.Background(), LayoutPrefix+o.Output+"@"+d.String(), VerifyOptions{Keys: []*sign.PublicKey{o.Key.Public()}, Repo: pe.Repo}); err != nil {
		t.Errorf("the layout's image does not verify: %v", err)
	}
}

// TestPushFailedAfterLayout: a push that fails (the registry answers 500)
// after the layout was written says the image is in the layout: its
// "a failed push does not move the image's tag" is the registry's, and the layout's tag
// had moved.
func TestPushFailedAfterLayout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
	}))
	defer srv.Close()
	st, o := echoBuild(t)
	o.Output = filepath.Join(t.TempDir(), "oci")
	o.Push = strings.TrimPrefix(srv.URL, "http://") + "/acme/echo:1.0"
	_, err := Build(context.Background(), st, o)
	var re *refusal.Error
	if !errors.As(err, &re) || re.Code != refusal.PushFailed || !strings.HasSuffix(re.Detail, "; the image is in the layout "+LayoutPrefix+o.Output+", written whole and signed before the push began") {
		t.Fatalf("%v", err)
	}
	if _, ok, err := layoutSource(o.Output).tag(context.Background(), "1.0"); err != nil || !ok {
		t.Errorf("the layout's 1.0: %v %v", ok, err)
	}
	// Built without a key, the layout's image is not signed, and the
	// refusal does not say it is (it said "written whole and signed").
	o.Key, o.Output = nil, filepath.Join(t.TempDir(), "oci")
	_, err = Build(context.Background(), st, o)
	if !errors.As(err, &re) || re.Code != refusal.PushFailed || !strings.HasSuffix(re.Detail, "; the image is in the layout "+LayoutPrefix+o.Output+", written whole (unsigned) before the push began") {
		t.Fatalf("unsigned: %v", err)
	}
	if pe := (&PushInterruptedError{Layout: o.Output}).InLayout(); strings.Contains(pe, "signed before") {
		t.Errorf("an unsigned build's interrupted push: %q", pe)
	}
}

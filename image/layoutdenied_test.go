package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

const layoutDeniedEnv = "CRUXPROV_TEST_LAYOUT_DENIED"

// TestLayoutDenied: a layout this user may not read (an executor reading
// an operator's layout under a directory of 0700) is fetch_failed saying
// so, with the path that denied it as its grant_read remedy, for image
// verify and for a build's base. Walking docs/images.md as an
// unprivileged user, it was image_digest_mismatch, "the layout does not
// hold the image as it was built: damaged, or changed since; write the
// image into it again": there was nothing to write again. And a layout
// this user may not write says so (layoutWriteFailed).
func TestLayoutDenied(t *testing.T) {
	var base string
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as an unprivileged user (root reads a directory of mode 0)")
		base = asuser.Dir(t, "cruxprov-layout-denied-")
	} else {
		base = testdir.New(t)
	}
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	dir := filepath.Join(base, "hidden", "oci")
	if err := writeLayout(context.Background(), dir, img, d, "one", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testdir.Writable(base) })
	if err := os.Chmod(filepath.Join(base, "hidden"), 0); err != nil {
		t.Fatal(err)
	}
	env := layoutDeniedEnv + "=" + LayoutPrefix + dir + "@" + d.String()
	if os.Geteuid() != 0 {
		layoutDenied(t, LayoutPrefix+dir+"@"+d.String())
		return
	}
	asuser.RunTest(t, base, "TestLayoutDeniedChild", env)
}

// TestLayoutDeniedChild is the unprivileged half of TestLayoutDenied.
func TestLayoutDeniedChild(t *testing.T) {
	ref := os.Getenv(layoutDeniedEnv)
	if ref == "" {
		t.Skip("TestLayoutDenied runs it as uid 65534")
	}
	layoutDenied(t, ref)
}

func layoutDenied(t *testing.T, s string) {
	t.Helper()
	ref, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	hidden := filepath.Dir(ref.Layout)
	check := func(t *testing.T, err error) {
		t.Helper()
		if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "permission denied to this user") ||
			!strings.Contains(err.Error(), "not damage to the image") || strings.Contains(err.Error(), "write the image into it again") {
			t.Errorf("%v, want fetch_failed saying the layout may not be read, not that it is damaged", err)
		}
		if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionGrantRead || rem.Target != hidden {
			t.Errorf("remedy %+v, want grant_read of %s", rem, hidden)
		}
	}
	t.Run("verify", func(t *testing.T) {
		_, err := Verify(context.Background(), s, VerifyOptions{Keys: []*sign.PublicKey{testKey(t).Public()}})
		check(t, err)
	})
	t.Run("base", func(t *testing.T) {
		_, err := loadBase(context.Background(), ref, "linux", "amd64", nil)
		check(t, err)
	})
	// A build's layout where this user may not write says so and what to
	// do: it said only "cannot write the layout DIR: mkdir DIR:
	// permission denied".
	t.Run("write", func(t *testing.T) {
		img, err := random.Image(1024, 1)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		out := filepath.Join(filepath.Dir(hidden), "ro", "new")
		err = layoutWriteFailed(out, writeLayout(context.Background(), out, img, d, "one", nil, nil))
		if err == nil || refusal.CodeOf(err) != "" || !strings.Contains(err.Error(), "cannot write the layout "+out+": permission denied to this user") ||
			!strings.Contains(err.Error(), "give a layout directory this user can write") {
			t.Errorf("%v (code %q), want a failure saying this user may not write there, and what to do", err, refusal.CodeOf(err))
		}
	})
}

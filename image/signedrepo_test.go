package image

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestBuildPushSignsWherePushed: a build pushing to one repository whose
// signature is to name another (Options.Repo) is an error naming both,
// before anything is built or pushed: it signed the image for Repo, pushed
// it to Push and said ok, and every verifier pulling it from there refused
// it (image_signature_invalid: "a signature for the repository …/other,
// not …/echo"). Repo spelled another way for the same repository signs
// for the push's own name, the one a verifier reads from the reference.
func TestBuildPushSignsWherePushed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String() // nothing listens: a push there would be push_failed, not this
	l.Close()
	st, o := echoBuild(t)
	o.Push, o.Repo = host+"/acme/echo:1.0", host+"/acme/other"
	_, err = Build(context.Background(), st, o)
	if err == nil || !strings.Contains(err.Error(), "the signature would name the repository "+host+"/acme/other, and the image is pushed to "+host+"/acme/echo") {
		t.Fatalf("Build pushing to …/echo signed for …/other: %v", err)
	}
	for _, c := range []struct{ push, repo, want string }{
		{host + "/acme/echo", "", host + "/acme/echo"},
		{host + "/acme/echo", host + "/acme/echo", host + "/acme/echo"},
		{"acme/echo", "index.docker.io/acme/echo", "index.docker.io/acme/echo"},
		{"docker.io/library/echo", "echo", "index.docker.io/library/echo"},
	} {
		p, err := name.NewRepository(c.push)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := SignedRepo(p, c.repo); err != nil || got != c.want {
			t.Errorf("SignedRepo(%s, %q) = %q, %v; want %s", c.push, c.repo, got, err, c.want)
		}
	}
	for _, repo := range []string{host + "/acme/other", host + "/acme/echo:1.0", "Acme/Echo", host + "/acme"} {
		p, _ := name.NewRepository(host + "/acme/echo")
		if got, err := SignedRepo(p, repo); err == nil {
			t.Errorf("SignedRepo(…/acme/echo, %q) = %q, want an error", repo, got)
		}
	}
}

// TestSignedRepoAnySpelling: a signature's repository and the one a
// verifier expects are compared as repositories, as a reference's is read
// (RepoName), in both directions: a layout signed for acme/echo verified
// as docker.io/acme/echo@… (whose repository reads index.docker.io/acme/echo)
// was refused image_signature_invalid, "a signature for the repository
// acme/echo, not index.docker.io/acme/echo", and so the other way round;
// another repository is still refused in any spelling. A build's Repo is
// named as it is read (RepoName), so the signature says
// index.docker.io/acme/echo for acme/echo.
func TestSignedRepoAnySpelling(t *testing.T) {
	res, out, key := signedBuild(t)
	d := res.Digest
	o := VerifyOptions{Keys: []*sign.PublicKey{key.Public()}, SkipBlobs: true}
	resign := func(t *testing.T, repo string) string {
		t.Helper()
		dir := copyDir(t, out)
		body, err := simpleSigning(repo, d)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := key.Sign(body)
		if err != nil {
			t.Fatal(err)
		}
		img, err := sigImage(body, sig)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		tag := SignatureTag(d)
		if err := lp.ReplaceImage(img, match.Annotation(refNameAnnotation, tag), layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
			t.Fatal(err)
		}
		return LayoutPrefix + dir + "@" + d.String()
	}
	for _, c := range []struct {
		signed string
		expect []string // the same repository
		other  []string // another
	}{
		{"acme/echo", []string{"acme/echo", "docker.io/acme/echo", "index.docker.io/acme/echo"}, []string{"acme/other", "quay.io/acme/echo", "localhost/acme/echo", "echo"}},
		{"index.docker.io/acme/echo", []string{"acme/echo", "docker.io/acme/echo"}, []string{"acme/echo/x", "registry.example/acme/echo"}},
		{"docker.io/library/echo", []string{"echo", "library/echo", "index.docker.io/library/echo"}, []string{"acme/echo"}},
		{"registry.example:5000/acme/echo", []string{"registry.example:5000/acme/echo"}, []string{"registry.example/acme/echo", "acme/echo"}},
	} {
		ref := resign(t, c.signed)
		for _, repo := range c.expect {
			o.Repo = repo
			if _, err := Verify(context.Background(), ref, o); err != nil {
				t.Errorf("signed for %s, verified as %s: %v", c.signed, repo, err)
			}
		}
		for _, repo := range c.other {
			o.Repo = repo
			if _, err := Verify(context.Background(), ref, o); !errors.Is(err, refusal.ImageSignatureInvalid) || !strings.Contains(err.Error(), "a signature for the repository "+c.signed+", not ") {
				t.Errorf("signed for %s, verified as %s: %v, want image_signature_invalid", c.signed, repo, err)
			}
		}
	}

	// A build names the repository as it is read.
	for _, c := range []struct{ repo, want string }{
		{"acme/echo", "index.docker.io/acme/echo"},
		{"docker.io/acme/echo", "index.docker.io/acme/echo"},
		{"registry.example/acme/echo", "registry.example/acme/echo"},
	} {
		if got, err := RepoName(c.repo); err != nil || got != c.want {
			t.Errorf("RepoName(%s) = %q, %v; want %s", c.repo, got, err, c.want)
		}
	}
	if _, err := RepoName("Acme/Echo"); err == nil {
		t.Error("RepoName(Acme/Echo): no error")
	}
	st, bo := echoBuild(t)
	bo.Output, bo.Repo, bo.Key = filepath.Join(t.TempDir(), "oci"), "acme/echo", key
	r, err := Build(context.Background(), st, bo)
	if err != nil {
		t.Fatal(err)
	}
	if r.Repo != "index.docker.io/acme/echo" {
		t.Errorf("built for --repo acme/echo: signed for %s", r.Repo)
	}
	for _, ref := range []string{"docker.io/acme/echo", "acme/echo"} {
		o.Repo = ref
		if _, err := Verify(context.Background(), LayoutPrefix+bo.Output+"@"+r.Digest.String(), o); err != nil {
			t.Errorf("built for acme/echo, verified as %s: %v", ref, err)
		}
	}
}

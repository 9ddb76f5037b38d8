package image

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
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

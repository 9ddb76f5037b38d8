package image

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/refusal"
)

// TestPushFailedSaysWhatToDo: every push refusal ends "run the build
// again" as docs/images.md says (refused credentials did not), and a
// registry that refuses the connection is said to be down or misnamed,
// not sent to check credentials it never asked for (the push's and the
// base read's advice both did). The errors are the ones a real push and
// a real read of a closed port return.
func TestPushFailedSaysWhatToDo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	unauthorized := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
	})}
	ul, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go unauthorized.Serve(ul)
	t.Cleanup(func() { unauthorized.Close() })

	read := func(host string) error {
		ref, err := name.ParseReference(host+"/acme/echo:1.0", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Head(ref, remote.WithContext(context.Background()))
		if err == nil {
			t.Fatalf("%s answered", host)
		}
		return err
	}
	for _, c := range []struct {
		name, host string
		says       []string
	}{
		{"connection refused", closed, []string{"the registry was not reached: nothing accepts connections there, so it is down or its host or port is wrong", "run the build again"}},
		{"credentials refused", ul.Addr().String(), []string{"refused the credentials", "run the build again"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo, _ := name.NewRepository(c.host+"/acme/echo", name.Insecure)
			err := pushFailed(repo, read(c.host))
			var re *refusal.Error
			if !errors.As(err, &re) || re.Code != refusal.PushFailed {
				t.Fatalf("%v: want push_failed", err)
			}
			for _, s := range c.says {
				if !strings.Contains(re.Detail, s) {
					t.Errorf("%q does not say %q", re.Detail, s)
				}
			}
			if !strings.HasSuffix(re.Detail, "run the build again (a failed push does not move the image's tag)") {
				t.Errorf("%q: want it to end with what docs/images.md promises", re.Detail)
			}
			// go-containerregistry's advice to the request's author, which
			// the operator cannot take: a push without credentials said
			// "401 Unauthorized (HEAD responses have no body, use GET for
			// details) (the registry refused the credentials …)".
			if strings.Contains(err.Error(), "use GET") {
				t.Errorf("%q: go-containerregistry's HEAD note", err)
			}
		})
	}
	// A read's refusal (image verify's of a .sig tag, by HEAD) neither,
	// and it names the host whose credentials the docker config is to
	// hold, as a push's does (image verify's named none).
	if err := readFailed(refusal.ImageSignatureInvalid, read(ul.Addr().String()), "cannot read %s", "sha256-….sig"); refusal.CodeOf(err) != refusal.FetchFailed ||
		!strings.Contains(err.Error(), "401 Unauthorized") || strings.Contains(err.Error(), "use GET") ||
		!strings.Contains(err.Error(), "write them for "+ul.Addr().String()+" in the docker config") {
		t.Errorf("a HEAD refused credentials: %v, want fetch_failed naming the status without go-containerregistry's HEAD note, and the host to write credentials for", err)
	}
	// The base read: a registry down is not a question of credentials.
	err = readFailed(refusal.ImageDigestMismatch, read(closed), "cannot read the base %s", closed)
	if refusal.CodeOf(err) != refusal.FetchFailed || strings.Contains(err.Error(), "credentials") || !strings.Contains(err.Error(), "so it is down") {
		t.Errorf("base read of a closed port: %v", err)
	}
}

package image

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

// TestPushTagLast: a push that fails after the image is in the registry
// but before its attestations are (a real docker-registry behind a
// loopback proxy that denies the .att manifest) leaves the tag where it
// was: a tag is moved only once the signature and attestations it needs
// are there, so `cosign verify REPO:TAG` never meets an image that a
// failed or interrupted CI job left unsigned under its release tag.
func TestPushTagLast(t *testing.T) {
	att := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.att$`)
	var deny atomic.Bool
	deny.Store(true)
	repo := inFront(t, "http://"+startDockerRegistry(t), func(w http.ResponseWriter, r *http.Request) bool {
		if deny.Load() && r.Method == http.MethodPut && att.MatchString(r.URL.Path) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden) // not retried by the client
			w.Write([]byte(`{"errors":[{"code":"DENIED","message":"denied by the test"}]}`))
			return true
		}
		return false
	}) + "/acme/echo"

	st, o := echoBuild(t)
	o.Push = repo + ":1.0"
	push := func() (*Result, error) { return Build(context.Background(), st, o) }
	if _, err := push(); err == nil || !strings.Contains(err.Error(), "cannot push") {
		t.Fatalf("a push whose attestations were denied: %v", err)
	}
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(r)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tags, "1.0") {
		t.Errorf("the failed push moved the tag 1.0 to an image without its attestations (tags %v)", tags)
	}
	// The registry taking them again, the same build tags it.
	deny.Store(false)
	res, err := push()
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(r.Tag("1.0"))
	if err != nil || d.Digest != res.Digest {
		t.Errorf("tag 1.0 after the retried push: %v %v, want %s", d, err, res.Digest)
	}
}

// TestPushAgainOnBlobRace: Debian's docker-registry answers a manifest
// PUT with DIGEST_INVALID and MANIFEST_BLOB_UNKNOWN when another push of
// the same blob links it at that moment (two CI jobs of one commit
// pushing at once: one of them failed, exit 1, about one round in eight
// with three builds). The push writes the manifest again, and the build
// succeeds. The loopback proxy in front of the real registry answers the
// first .sig manifest PUT the way the registry answered it in that race.
func TestPushAgainOnBlobRace(t *testing.T) {
	sig := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.sig$`)
	var raced atomic.Int32
	repo := inFront(t, "http://"+startDockerRegistry(t), func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && sig.MatchString(r.URL.Path) && raced.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"errors":[{"code":"DIGEST_INVALID","message":"provided digest did not match uploaded content"},{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown to registry","detail":"sha256:a5c0a0de36adfe765397df7d5333a2a3a21d46d357538fc95fbf93e3cbbc9eb2"}]}`))
			return true
		}
		return false
	}) + "/acme/echo"
	key := testKey(t)
	res := build(t, buildCase{push: repo + ":1.0", key: key})
	if raced.Load() < 2 {
		t.Fatalf("the .sig manifest was put %d times", raced.Load())
	}
	if _, err := Verify(context.Background(), repo+"@"+res.Digest.String(), VerifyOptions{Keys: []*sign.PublicKey{key.Public()}}); err != nil {
		t.Errorf("verify after the retried push: %v", err)
	}
}

// TestPushKeepsOtherSignatures: the same build (the same digest: it is
// reproducible) pushed again by another builder key, as a second runner
// or a rotated CI key does, adds its signature and attestations to those
// in the registry instead of replacing them (cosign adds signatures the
// same way), so an executor whose accepted pin trusts the first builder
// still verifies the image; a rerun under a key that already signed adds
// nothing. It replaced them: every run of the accepted pin was refused
// image_signature_invalid after a CI rerun.
func TestPushKeepsOtherSignatures(t *testing.T) {
	host := startDockerRegistry(t)
	repo := host + "/acme/echo"
	opts := echoOptions(t)
	ctx := context.Background()
	push := func(key *sign.PrivateKey, builder string) *Result {
		t.Helper()
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Key, o.BuilderID, o.Push = key, builder, repo+":1.0"
		o.Root = pipelinetest.OpenRoot(t, st, fx.Echo.Path)
		res, err := Build(ctx, st, o)
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		return res
	}
	a, b := testKey(t), testKey(t)
	const idA, idB = "https://ci-a.example/builder", "https://ci-b.example/builder"
	ra := push(a, idA)
	rb := push(b, idB)
	if ra.Digest != rb.Digest {
		t.Fatalf("the two builds differ: %s %s", ra.Digest, rb.Digest)
	}
	ref := repo + "@" + ra.Digest.String()
	for _, c := range []struct {
		keys    []*sign.PublicKey
		builder string
	}{
		{[]*sign.PublicKey{a.Public()}, idA},
		{[]*sign.PublicKey{b.Public()}, idB},
		{[]*sign.PublicKey{a.Public(), b.Public()}, idA},
		{[]*sign.PublicKey{a.Public(), b.Public()}, idB},
	} {
		t.Run(fmt.Sprintf("%d keys, builder %s", len(c.keys), c.builder), func(t *testing.T) {
			if _, err := Verify(ctx, ref, VerifyOptions{Keys: c.keys, Expect: Expect{BuilderID: c.builder}}); err != nil {
				t.Error(err)
			}
		})
	}
	count := func(tag string) int {
		t.Helper()
		r, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		return len(m.Layers)
	}
	sigs, atts := count(SignatureTag(ra.Digest)), count(AttestationTag(ra.Digest))
	if sigs != 2 || atts != 4 {
		t.Errorf("after two builders: %d signatures, %d attestations (want 2, 4)", sigs, atts)
	}
	push(a, idA) // a rerun: its signature and attestations are there already
	if s, at := count(SignatureTag(ra.Digest)), count(AttestationTag(ra.Digest)); s != sigs || at != atts {
		t.Errorf("a rerun under the same key: %d signatures, %d attestations (were %d, %d)", s, at, sigs, atts)
	}
}

// TestPushAdvice: a push the registry refuses for want of credentials (a
// real docker-registry with htpasswd auth) says what to do about it; it
// said "unexpected status code 401 Unauthorized (HEAD responses have no
// body, use GET for details)". With the credentials in the docker config
// (DOCKER_CONFIG, read through the default keychain as cmd/ does) the
// push succeeds.
func TestPushAdvice(t *testing.T) {
	host := imagetest.DockerRegistry(t, "ci", "s3cret")
	dir := t.TempDir()
	docker := filepath.Join(dir, "docker")
	os.Mkdir(docker, 0o700)
	t.Setenv("DOCKER_CONFIG", docker)

	opts := echoOptions(t)
	opts.Push, opts.Remote = host+"/acme/echo", []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	push := func() error {
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Root = pipelinetest.OpenRoot(t, st, fx.Echo.Path)
		_, err = Build(context.Background(), st, o)
		return err
	}
	err := push()
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "docker config") || !strings.Contains(err.Error(), host) {
		t.Errorf("a push without credentials: %v", err)
	}
	_, err = Verify(context.Background(), host+"/acme/echo@sha256:"+strings.Repeat("0", 64), VerifyOptions{
		Keys: []*sign.PublicKey{testKey(t).Public()}, Remote: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}})
	if refusal.CodeOf(err) != refusal.FetchFailed || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "not reached") {
		t.Errorf("verify without credentials: %v", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600)
	if err := push(); err != nil {
		t.Errorf("a push with the credentials in the docker config: %v", err)
	}
}

// TestPushConcurrentKeysKeepBoth: two builders push the same digest at
// once under their own keys, and one reads the .sig tag before the other
// writes it and writes its merge after (a loopback proxy in front of a
// real docker-registry holds B's .sig PUT until A's is done, and A's
// next request until B's is done). A registry has no compare-and-swap,
// so B's write drops A's signature; A reads the tags again after its
// push and adds it back. Before, A's build said it was signed while the
// registry held only B's signature (one round in two with two CI keys at
// once), and every verify under A's key was refused.
func TestPushConcurrentKeysKeepBoth(t *testing.T) {
	host := startDockerRegistry(t)
	target, _ := url.Parse("http://" + host)
	proxy := httputil.NewSingleHostReverseProxy(target)
	sig := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.sig$`)
	bRead, aWrote, bWrote := make(chan struct{}), make(chan struct{}), make(chan struct{})
	wait := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(2 * time.Minute):
		}
	}
	var mu sync.Mutex
	gets, puts := 0, 0
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sig.MatchString(r.URL.Path) && (r.Method == http.MethodGet || r.Method == http.MethodPut) {
			mu.Lock()
			n := 0
			if r.Method == http.MethodGet {
				gets++
				n = gets
			} else {
				puts++
				n = puts
			}
			mu.Unlock()
			switch {
			case r.Method == http.MethodGet && n == 1: // B reads
				proxy.ServeHTTP(w, r)
				close(bRead)
				return
			case r.Method == http.MethodPut && n == 1: // B writes, after A
				wait(aWrote)
				proxy.ServeHTTP(w, r)
				close(bWrote)
				return
			case r.Method == http.MethodPut && n == 2: // A writes
				proxy.ServeHTTP(w, r)
				close(aWrote)
				return
			}
		}
		select {
		case <-aWrote: // A goes on once B has written
			wait(bWrote)
		default:
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	repo := strings.TrimPrefix(front.URL, "http://") + "/acme/echo"

	opts := echoOptions(t)
	opts.Push = repo + ":1.0"
	push := func(key *sign.PrivateKey) (*Result, error) {
		st, err := store.Open(t.TempDir())
		if err != nil {
			return nil, err
		}
		o := opts
		o.Key = key
		o.Root = pipelinetest.OpenRoot(t, st, fx.Echo.Path)
		return Build(context.Background(), st, o)
	}
	a, b := testKey(t), testKey(t)
	bDone := make(chan error, 1)
	go func() {
		_, err := push(b)
		bDone <- err
	}()
	wait(bRead)
	ra, err := push(a)
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	ref := repo + "@" + ra.Digest.String()
	for name, k := range map[string]*sign.PrivateKey{"A": a, "B": b} {
		if _, err := Verify(context.Background(), ref, VerifyOptions{Keys: []*sign.PublicKey{k.Public()}}); err != nil {
			t.Errorf("verify under %s's key: %v", name, err)
		}
	}
}

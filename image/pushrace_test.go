package image

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// racePush is an image to push by pushAll (random content: no build) and
// the signature and attestations of it under each of n keys.
type racePush struct {
	top    v1.Image
	d      v1.Hash
	keys   []*sign.PrivateKey
	extras [][]tagged
}

func newRacePush(t *testing.T, repo name.Repository, n int) *racePush {
	t.Helper()
	top, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	d, err := top.Digest()
	if err != nil {
		t.Fatal(err)
	}
	p := &racePush{top: top, d: d}
	res := &Result{Digest: d, Platforms: []PlatformImage{{Digest: d, prov: []byte(`{}`), sbom: []byte(`{}`)}}}
	for range n {
		k := testKey(t)
		extra, err := signAll(k, repo.String(), res)
		if err != nil {
			t.Fatal(err)
		}
		p.keys, p.extras = append(p.keys, k), append(p.extras, extra)
	}
	return p
}

func (p *racePush) push(repo name.Repository, i int) error {
	return pushAll(context.Background(), repo, "1.0", p.top, p.d, p.extras[i], p.keys[i].Public(), withStall(nil))
}

// kept says whether the registry holds key i's signature and its two
// attestations under the .sig and .att tags, and what it lacks.
func (p *racePush) kept(t *testing.T, repo name.Repository, i int) (bool, string) {
	t.Helper()
	read := func(tag string) ([]v1.Descriptor, v1.Image) {
		t.Helper()
		img, err := remote.Image(repo.Tag(tag))
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		return m.Layers, img
	}
	sigs, _ := read(SignatureTag(p.d))
	atts, attImg := read(AttestationTag(p.d))
	body, err := simpleSigning(repo.String(), p.d)
	if err != nil {
		t.Fatal(err)
	}
	pub := p.keys[i].Public()
	signed := false
	for _, l := range sigs {
		if s, err := base64.StdEncoding.DecodeString(l.Annotations[SignatureAnnotation]); err == nil && pub.Verify(body, s) == nil {
			signed = true
		}
	}
	attested := 0
	for _, l := range atts {
		ll, err := attImg.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ll.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		env, err := readAllCapped(rc, maxManifest)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := openEnvelope(env, []*sign.PublicKey{pub}); err == nil {
			attested++
		}
	}
	if signed && attested == 2 {
		return true, ""
	}
	return false, fmt.Sprintf("its signature there: %v, its attestations: %d of 2 (.sig has %d layers, .att %d)", signed, attested, len(sigs), len(atts))
}

// TestPushManyKeysKeepAll: six builders push the signature and
// attestations of one digest at once, each under its own key, to a real
// docker-registry, and every push keeps them there. A registry has no
// compare-and-swap for a tag; each push read its tags again at once
// after writing them, and a push that had read them before and wrote
// its merge after that read dropped what the first added, which said it
// succeeded all the same: in every round of ten on a loaded host, some
// push said so and its attestations were not there, and others failed
// as "replaced 4 times in a row", an error of no refusal's code.
func TestPushManyKeysKeepAll(t *testing.T) {
	const n = 6
	repo, err := name.NewRepository(startDockerRegistry(t) + "/acme/race")
	if err != nil {
		t.Fatal(err)
	}
	p := newRacePush(t, repo, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.push(repo, i)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("push %d: %v", i, errs[i])
		} else if ok, lacks := p.kept(t, repo, i); !ok {
			t.Errorf("push %d said it succeeded, and the registry lacks it: %s", i, lacks)
		}
	}
}

// TestPushKeepsEarlierSignatures: a push that finds its .sig tag
// replaced after writing it (by a push that read the tag before the
// earlier builder X signed: the test writes that push's merge, key Q's
// signature alone, right after this push's write) adds back its own
// signature and X's, which it saw there before. It added back its own:
// X's, whose push was done, was lost.
func TestPushKeepsEarlierSignatures(t *testing.T) {
	host := startDockerRegistry(t)
	direct, err := name.NewRepository(host + "/acme/race")
	if err != nil {
		t.Fatal(err)
	}
	sig := regexp.MustCompile(`^/v2/.+/manifests/sha256-[0-9a-f]{64}\.sig$`)
	var (
		p        *racePush
		replaced atomic.Bool
	)
	front := inFront(t, "http://"+host, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut || !sig.MatchString(r.URL.Path) || replaced.Swap(true) {
			return false
		}
		httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host}).ServeHTTP(w, r)
		// Q's merge of the tag as it was before X pushed: Q's alone.
		if err := remote.Write(direct.Tag(SignatureTag(p.d)), p.extras[2][0].img); err != nil {
			t.Error(err)
		}
		return true
	})
	repo, err := name.NewRepository(front + "/acme/race")
	if err != nil {
		t.Fatal(err)
	}
	p = newRacePush(t, direct, 3) // X, this push, Q
	if p.extras[2][0].tag != SignatureTag(p.d) {
		t.Fatalf("the first image signAll makes is under %s", p.extras[2][0].tag)
	}
	replaced.Store(true)
	if err := p.push(repo, 0); err != nil {
		t.Fatal(err)
	}
	replaced.Store(false)
	if err := p.push(repo, 1); err != nil {
		t.Fatal(err)
	}
	if !replaced.Load() {
		t.Fatal("the push wrote no .sig tag")
	}
	for i, who := range []string{"X", "this push"} {
		if ok, lacks := p.kept(t, direct, i); !ok {
			t.Errorf("%s's: %s", who, lacks)
		}
	}
}

// TestPushDroppedRefused: a push whose signature and attestations are
// dropped from their tags every time it writes them (a loopback proxy
// puts them under another tag, as other pushes writing their merges at
// once would leave them) is refused push_failed, saying to push again,
// and does not move the image's tag. It was an error of no refusal's code (exit 1), and
// the tag had been moved already.
func TestPushDroppedRefused(t *testing.T) {
	host := startDockerRegistry(t)
	cosignTag := regexp.MustCompile(`^(/v2/.+/manifests/sha256-[0-9a-f]{64})\.(sig|att)$`)
	front := inFront(t, "http://"+host, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && cosignTag.MatchString(r.URL.Path) {
			r.URL.Path = cosignTag.ReplaceAllString(r.URL.Path, "$1.$2-dropped")
		}
		return false
	})
	repo, err := name.NewRepository(front + "/acme/race")
	if err != nil {
		t.Fatal(err)
	}
	p := newRacePush(t, repo, 1)
	err = p.push(repo, 0)
	err = pushFailed(repo, err)
	if refusal.CodeOf(err) != refusal.PushFailed || !strings.Contains(err.Error(), "push again") || !strings.Contains(err.Error(), "dropped by other pushes") {
		t.Errorf("a push whose signature was dropped each time: %v", err)
	}
	tags, err := remote.List(repo)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tags, "1.0") {
		t.Errorf("the refused push moved the tag 1.0 (tags %v)", tags)
	}
}

package image

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
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

// TestPushDroppedRefused: a push whose signature and attestations are
// dropped from their tags every time it writes them (a loopback proxy
// puts them under another tag, as other pushes writing their merges at
// once would leave them) is refused push_failed, saying to push again,
// and moves no tag. It was an error of no refusal's code (exit 1), and
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

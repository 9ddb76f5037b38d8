package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestVerifyCosignBounded: image verify (before every container run)
// reads the .sig and .att tags, which a registry may answer as it likes:
// a signature image of many large layers is refused
// image_signature_invalid once it holds more than maxCosignBytes (32 MiB), not
// held in memory whole. Before, every layer of at most 4 MiB was kept,
// without a bound on their number (a manifest may be 100 MiB of layers).
func TestVerifyCosignBounded(t *testing.T) {
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(mem.Close)
	blob := bytes.Repeat([]byte("x"), maxManifest)
	bsum := sha256.Sum256(blob)
	bdig := "sha256:" + hex.EncodeToString(bsum[:])
	var layers []string
	for i := 0; i < 12; i++ {
		layers = append(layers, fmt.Sprintf(`{"mediaType":%q,"size":%d,"digest":%q,"annotations":{%q:"AAAA"}}`, SimpleSigningMediaType, len(blob), bdig, SignatureAnnotation))
	}
	man := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},"layers":[` + strings.Join(layers, ",") + `]}`)
	msum := sha256.Sum256(man)
	mdig := "sha256:" + hex.EncodeToString(msum[:])
	var hostile atomic.Bool
	var sent atomic.Int64
	repo := inFront(t, mem.URL, func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case hostile.Load() && (strings.HasSuffix(r.URL.Path, ".sig") || strings.HasSuffix(r.URL.Path, "/manifests/"+mdig)):
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", mdig)
			w.Header().Set("Content-Length", fmt.Sprint(len(man)))
			if r.Method == http.MethodGet {
				w.Write(man)
			}
		case hostile.Load() && strings.HasSuffix(r.URL.Path, "/blobs/"+bdig):
			w.Header().Set("Content-Length", fmt.Sprint(len(blob)))
			n, _ := w.Write(blob)
			sent.Add(int64(n))
		default:
			return false
		}
		return true
	}) + "/acme/echo"
	key := testKey(t)
	res := build(t, buildCase{push: repo, key: key})
	o := VerifyOptions{Keys: []*sign.PublicKey{key.Public()}, SkipBlobs: true}
	if _, err := Verify(context.Background(), repo+"@"+res.Digest.String(), o); err != nil {
		t.Fatal(err)
	}
	hostile.Store(true)
	_, err := Verify(context.Background(), repo+"@"+res.Digest.String(), o)
	t.Logf("%d bytes of signature layers sent: %v", sent.Load(), err)
	if refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
		t.Errorf("a signature image of %d layers of %d bytes: %v, want image_signature_invalid", len(layers), len(blob), err)
	}
	if sent.Load() > maxCosignBytes+int64(len(blob)) {
		t.Errorf("%d bytes of signature layers read", sent.Load())
	}
}

package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// FuzzVerifyLayout: an OCI layout is read back from a directory anyone
// may have written (a CI artifact, a copy): index.json, the manifest or
// index the reference pins, and the config it names. Whatever they hold,
// Verify reports or refuses with a typed refusal, without panicking. The
// fuzzed manifest's "@CFG@" and "@CFGSIZE@" become the config's digest and
// size, and index.json's "@MAN@" the manifest's digest and "@SIG@" and
// "@SIGTAG@" a signature manifest's digest and tag, so that inputs reach
// past the digest checks; the signature manifest holds the fuzzed payload
// (its "@MAN@" the manifest's digest) signed by the trusted key, so that
// they reach the checks of what a signature says too.
func FuzzVerifyLayout(f *testing.F) {
	privPEM, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		f.Fatal(err)
	}
	priv, err := sign.LoadPrivateKey(privPEM, []byte("pw"))
	if err != nil {
		f.Fatal(err)
	}
	key := priv.Public()
	man := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"@CFG@","size":@CFGSIZE@},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"@CFG@","size":@CFGSIZE@}]}`
	cfg := `{"architecture":"amd64","os":"linux","config":{"Labels":{"org.cruxible.platform":"cp312-manylinux_2_39_x86_64"}},"rootfs":{"type":"layers","diff_ids":[]}}`
	ix := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@MAN@","size":1,"annotations":{"org.opencontainers.image.ref.name":"latest"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@SIG@","size":1,"annotations":{"org.opencontainers.image.ref.name":"@SIGTAG@"}}]}`
	pl := `{"critical":{"identity":{"docker-reference":""},"image":{"docker-manifest-digest":"@MAN@"},"type":"cosign container image signature"},"optional":null}`
	f.Add([]byte(ix), []byte(man), []byte(cfg), []byte(pl))
	f.Add([]byte(ix), []byte(man), []byte(cfg), []byte(`{"critical":{"image":{"docker-manifest-digest":"sha256:0"},"type":"x"}}`))
	f.Add([]byte(ix), []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@CFG@","size":@CFGSIZE@,"platform":{"os":"linux","architecture":"amd64"}}]}`), []byte(man), []byte(pl))
	// A key twice (or two cases of one field's key) in each document:
	// refused, never read as its last.
	f.Add([]byte(`{"manifests":[],`+ix[1:]), []byte(`{"layers":[],`+man[1:]), []byte(`{"os":"windows",`+cfg[1:]), []byte(`{"critical":{"image":{"Docker-Manifest-Digest":"sha256:0","docker-manifest-digest":"@MAN@"}}}`))
	f.Add([]byte(`{}`), []byte(`{"manifests":null}`), []byte(`{}`), []byte(`{}`))
	f.Add([]byte(`[`), []byte(`{"config":{"digest":"sha256:x","size":-1}}`), []byte(``), []byte(``))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, index, manifest, config, payload []byte) {
		os.RemoveAll(dir)
		blobs := filepath.Join(dir, "blobs", "sha256")
		if err := os.MkdirAll(blobs, 0o755); err != nil {
			t.Fatal(err)
		}
		put := func(b []byte) string {
			sum := sha256.Sum256(b)
			h := hex.EncodeToString(sum[:])
			if err := os.WriteFile(filepath.Join(blobs, h), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return h
		}
		c := put(config)
		manifest = bytes.ReplaceAll(manifest, []byte("@CFG@"), []byte("sha256:"+c))
		manifest = bytes.ReplaceAll(manifest, []byte("@CFGSIZE@"), []byte(strconv.Itoa(len(config))))
		m := put(manifest)
		payload = bytes.ReplaceAll(payload, []byte("@MAN@"), []byte("sha256:"+m))
		sig, err := priv.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		p := put(payload)
		sigMan, _ := json.Marshal(map[string]any{
			"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
			"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + c, "size": len(config)},
			"layers": []any{map[string]any{"mediaType": SimpleSigningMediaType, "digest": "sha256:" + p, "size": len(payload),
				"annotations": map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)}}},
		})
		sm := put(sigMan)
		index = bytes.ReplaceAll(index, []byte("@MAN@"), []byte("sha256:"+m))
		index = bytes.ReplaceAll(index, []byte("@SIG@"), []byte("sha256:"+sm))
		index = bytes.ReplaceAll(index, []byte("@SIGTAG@"), []byte("sha256-"+m+".sig"))
		if err := os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []bool{false, true} {
			_, err := Verify(context.Background(), LayoutPrefix+dir+"@sha256:"+m, VerifyOptions{Keys: []*sign.PublicKey{key}, SkipBlobs: skip})
			if err == nil {
				t.Fatal("verified an image with no attestations")
			}
			if refusal.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

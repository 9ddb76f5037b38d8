package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// size, and index.json's "@MAN@" the manifest's digest, so that inputs
// reach past the digest checks.
func FuzzVerifyLayout(f *testing.F) {
	_, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		f.Fatal(err)
	}
	key, err := sign.ParsePublicKey(pub)
	if err != nil {
		f.Fatal(err)
	}
	man := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"@CFG@","size":@CFGSIZE@},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"@CFG@","size":@CFGSIZE@}]}`
	cfg := `{"architecture":"amd64","os":"linux","config":{"Labels":{"org.cruxible.platform":"cp312-manylinux_2_39_x86_64"}},"rootfs":{"type":"layers","diff_ids":[]}}`
	ix := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@MAN@","size":1,"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}`
	f.Add([]byte(ix), []byte(man), []byte(cfg))
	f.Add([]byte(ix), []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"@CFG@","size":@CFGSIZE@,"platform":{"os":"linux","architecture":"amd64"}}]}`), []byte(man))
	f.Add([]byte(`{}`), []byte(`{"manifests":null}`), []byte(`{}`))
	f.Add([]byte(`[`), []byte(`{"config":{"digest":"sha256:x","size":-1}}`), []byte(``))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, index, manifest, config []byte) {
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
		index = bytes.ReplaceAll(index, []byte("@MAN@"), []byte("sha256:"+m))
		if err := os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []bool{false, true} {
			_, err := Verify(context.Background(), LayoutPrefix+dir+"@sha256:"+m, VerifyOptions{Keys: []*sign.PublicKey{key}, SkipBlobs: skip})
			if err == nil {
				t.Fatal("verified an image no trusted key signed")
			}
			if refusal.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestImageVerifyKeyTwice: image verify of a layout whose documents say
// a key twice refuses, exit 78, in one line naming the document and the
// key (docs/images.md, "Said one way"): the signature's manifest with
// "layers" twice (its digest and index.json's entry for its tag written
// again, so that only the key check refuses it) image_signature_invalid,
// the layout's index.json with "manifests" twice image_digest_mismatch.
// Both verified before, with each key once.
func TestImageVerifyKeyTwice(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	baseLayout, baseDigest := imagetest.Base(t)
	dir := t.TempDir()
	fx, idx := fixtureindex.Serve(t, dir)
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "builder.key"), filepath.Join(dir, "builder.pub")
	os.WriteFile(keyPath, priv, 0o600)
	os.WriteFile(pubPath, pub, 0o644)
	out := filepath.Join(dir, "oci")
	cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
		"--platform", imagetest.Platform, "--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", imagetest.Shim(t),
		"--output", "oci:"+out, "--sign-key", keyPath, "--repo", "localhost/acme/echo", "--json")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000"}
	r := runCmd(t, cmd)
	var built struct{ Digest string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil {
		t.Fatalf("image build: %+v", r)
	}
	verify := func() result {
		t.Helper()
		return cruxprov(t, "image", "verify", "oci:"+out+"@"+built.Digest, "--key", pubPath)
	}
	if r := verify(); r.code != 0 {
		t.Fatalf("image verify of the image as built: %+v", r)
	}
	indexJSON := filepath.Join(out, "index.json")
	ix, err := os.ReadFile(indexJSON)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, code refusal.Code, says string) {
		t.Helper()
		r := verify()
		line := strings.TrimSuffix(r.stderr, "\n")
		t.Logf("%s: exit %d: %s", what, r.code, line)
		if r.code != exitRefused || strings.Contains(line, "\n") || !strings.HasPrefix(line, "refused: "+string(code)+": ") || !strings.Contains(line, says) {
			t.Errorf("%s: %+v, want exit %d and one line refused: %s saying %q", what, r, exitRefused, code, says)
		}
	}

	// The signature's manifest, "layers" said twice (the last the real
	// one), under a digest of its own that index.json names for its tag.
	d, err := v1.NewHash(built.Digest)
	if err != nil {
		t.Fatal(err)
	}
	sigTag := image.SignatureTag(d)
	var doc struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(ix, &doc); err != nil {
		t.Fatal(err)
	}
	old := ""
	for _, m := range doc.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] == sigTag {
			old = m.Digest
		}
	}
	if old == "" {
		t.Fatalf("index.json names no %s: %s", sigTag, ix)
	}
	raw, err := os.ReadFile(filepath.Join(out, "blobs", "sha256", strings.TrimPrefix(old, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	twice := append([]byte(`{"layers":[],`), raw[1:]...)
	sum := sha256.Sum256(twice)
	nd := "sha256:" + hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(out, "blobs", "sha256", hex.EncodeToString(sum[:])), twice, 0o644); err != nil {
		t.Fatal(err)
	}
	nix := bytes.Replace(ix, []byte(`"`+old+`","size":`+strconv.Itoa(len(raw))), []byte(`"`+nd+`","size":`+strconv.Itoa(len(twice))), 1)
	if bytes.Equal(nix, ix) {
		// index.json's descriptor order is go-containerregistry's:
		// size before digest.
		nix = bytes.Replace(ix, []byte(`"size":`+strconv.Itoa(len(raw))+`,"digest":"`+old+`"`), []byte(`"size":`+strconv.Itoa(len(twice))+`,"digest":"`+nd+`"`), 1)
	}
	if bytes.Equal(nix, ix) {
		t.Fatalf("cannot find %s's entry in %s", old, ix)
	}
	os.WriteFile(indexJSON, nix, 0o644)
	refused("the signature's manifest", refusal.ImageSignatureInvalid, `the manifest `+nd+` of `+sigTag+` has the key "layers" twice`)

	// index.json, "manifests" said twice (the last the real one).
	os.WriteFile(indexJSON, append([]byte(`{"manifests":[],`), ix[1:]...), 0o644)
	refused("index.json", refusal.ImageDigestMismatch, indexJSON+` has the key "manifests" twice`)
}

// TestImageBuildOntoIndexKeyTwice: image build --output oci:DIR onto a
// layout whose index.json says "manifests" twice refuses, exit 78, one
// line image_digest_mismatch naming the file and the key, index.json
// left as it was, where it rewrote it keeping the last "manifests" (the
// first's entries dropped without a word) while image verify of the
// layout refused it. image verify's refusal says so too, and what to do:
// index.json moved away, the build writes it anew and the image
// verifies.
func TestImageBuildOntoIndexKeyTwice(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	baseLayout, baseDigest := imagetest.Base(t)
	dir := t.TempDir()
	fx, idx := fixtureindex.Serve(t, dir)
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "builder.key"), filepath.Join(dir, "builder.pub")
	os.WriteFile(keyPath, priv, 0o600)
	os.WriteFile(pubPath, pub, 0o644)
	out := filepath.Join(dir, "oci")
	build := func() result {
		t.Helper()
		cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
			"--platform", imagetest.Platform, "--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", imagetest.Shim(t),
			"--output", "oci:"+out, "--sign-key", keyPath, "--repo", "localhost/acme/echo", "--json")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000"}
		return runCmd(t, cmd)
	}
	r := build()
	var built struct{ Digest string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil {
		t.Fatalf("image build: %+v", r)
	}
	indexJSON := filepath.Join(out, "index.json")
	ix, err := os.ReadFile(indexJSON)
	if err != nil {
		t.Fatal(err)
	}
	twice := append([]byte(`{"manifests":[],`), ix[1:]...)
	os.WriteFile(indexJSON, twice, 0o644)

	r = build()
	line := strings.TrimSuffix(r.stderr, "\n")
	t.Logf("image build onto it: exit %d: %s", r.code, line)
	if r.code != exitRefused || strings.Contains(line, "\n") || !strings.HasPrefix(line, "refused: image_digest_mismatch: "+indexJSON+` has the key "manifests" twice`) ||
		!strings.Contains(line, "it was not rewritten") {
		t.Errorf("image build onto it: %+v, want exit %d and one line refused: image_digest_mismatch naming %s and the key", r, exitRefused, indexJSON)
	}
	if b, _ := os.ReadFile(indexJSON); !bytes.Equal(b, twice) {
		t.Errorf("index.json rewritten: %s", b)
	}

	verify := func() result {
		t.Helper()
		return cruxprov(t, "image", "verify", "oci:"+out+"@"+built.Digest, "--key", pubPath)
	}
	if r := verify(); r.code != exitRefused || !strings.Contains(r.stderr, "a write into the layout refuses it too: restore it from a copy of the layout, or move it away and write the image into the layout again") {
		t.Errorf("image verify: %+v, want it to say what to do about index.json", r)
	}
	// As advised: index.json moved away, the build writes it anew.
	if err := os.Rename(indexJSON, indexJSON+".twice"); err != nil {
		t.Fatal(err)
	}
	if r := build(); r.code != 0 {
		t.Fatalf("image build after index.json was moved away: %+v", r)
	}
	if r := verify(); r.code != 0 {
		t.Errorf("image verify after the build: %+v", r)
	}
}

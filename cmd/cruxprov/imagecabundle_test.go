package main

import (
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
)

// TestImagePushCABundle: image build's --ca-bundle is trusted by the
// registry's requests too, and a registry whose certificate this host
// does not trust is refused saying so and what to do. Walking
// docs/images.md with a docker-registry under a private CA, --ca-bundle
// CA.pem was silently the index's alone, and the push was refused "HTTP
// 400: check its log" (the plain-HTTP retry's answer), the certificate
// the real cause; image verify said the same of the read, and took no
// --ca-bundle: now it does, and its refusal says to give one.
func TestImagePushCABundle(t *testing.T) {
	baseLayout, baseDigest := imagetest.Base(t)
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	build := func(extra ...string) result {
		args := append([]string{"--home", home, "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
			"--platform", imagetest.Platform, "--base", "oci:" + baseLayout + "@" + baseDigest.String(),
			"--shim", imagetest.Shim(t), "--push", host + "/acme/echo:1.0", "--quiet"}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000", "DOCKER_CONFIG="+t.TempDir())
		return runCmd(t, cmd)
	}
	const advice = "this host does not trust the registry's TLS certificate: trust the CA that signed it"
	r := build()
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: push_failed: the push to the registry "+host+" failed: ") ||
		!strings.Contains(r.stderr, advice) || strings.Contains(r.stderr, "check its log") ||
		!strings.Contains(r.stderr, "; to fix: SOURCE_DATE_EPOCH=1700000000 cruxprov --home "+home+" image build ") || !strings.HasSuffix(strings.TrimSpace(r.stderr), "--ca-bundle FILE") {
		t.Fatalf("no --ca-bundle: %+v, want the advice and the build again with --ca-bundle FILE", r)
	}
	r = build("--ca-bundle", ca)
	if r.code != 0 {
		t.Fatalf("--ca-bundle %s: %+v", ca, r)
	}
	ref := host + "/acme/echo@" + strings.TrimSpace(r.stdout)
	pub := filepath.Join(t.TempDir(), "k")
	t.Setenv("CRUXPROV_KEY_PASSWORD", "pw")
	if r := cruxprov(t, "key", "generate", "--out", pub); r.code != 0 {
		t.Fatal(r)
	}
	r = cruxprov(t, "image", "verify", ref, "--key", pub+".pub")
	// image verify takes --ca-bundle too: the advice, and the verify
	// again with it (TestPrivateCARegistry checks it on a registry
	// serving HTTPS alone).
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: fetch_failed: cannot read "+ref) || !strings.Contains(r.stderr, advice) ||
		!strings.Contains(r.stderr, "; to fix: cruxprov image verify "+ref+" ") || !strings.HasSuffix(strings.TrimSpace(r.stderr), "--ca-bundle FILE") {
		t.Fatalf("verify, the CA not trusted: %+v", r)
	}
	// With it the registry is read: the image built unsigned is refused
	// for that, and no longer for its certificate.
	if r := cruxprov(t, "image", "verify", ref, "--key", pub+".pub", "--ca-bundle", ca); r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: image_signature_invalid: ") || strings.Contains(r.stderr, advice) {
		t.Fatalf("verify --ca-bundle %s of the unsigned image: %+v, want it read and refused unsigned", ca, r)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
)

// TestImageRefNotAReference: an image named with no registry (a layout's
// directory without oci:, a Docker Hub name without docker.io/) or with
// an uppercase repository is a usage error that says how an image is
// named, before anything is read: --base of image build, image verify's
// reference, install's --image. Walking docs/images.md, each exited 1 with
// go-containerregistry's words alone, "strict validation requires the
// registry to be explicitly defined".
func TestImageRefNotAReference(t *testing.T) {
	dir := t.TempDir()
	lay := filepath.Join(dir, "lay")
	os.MkdirAll(filepath.Join(lay, "blobs", "sha256"), 0o755)
	os.WriteFile(filepath.Join(lay, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	fx, err := fixtures.Build(filepath.Join(dir, "fx"), fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	whl := fx.Echo.Path
	t.Setenv("CRUXPROV_KEY_PASSWORD", "pw")
	if r := cruxprov(t, "key", "generate", "--out", filepath.Join(dir, "builder")); r.code != 0 {
		t.Fatalf("key generate: %+v", r)
	}
	pub := filepath.Join(dir, "builder.pub")
	d := "@sha256:" + strings.Repeat("0", 64)
	const how = "name an image in a registry as REGISTRY/REPO@sha256:<hex> (docker.io/library/debian@sha256:<hex> for Docker Hub), or one in an OCI layout as oci:DIR@sha256:<hex>"
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	build := func(base string) result {
		return cruxprov(t, "image", "build", "--wheel", whl,
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", base, "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"))
	}
	for _, c := range []struct {
		name string
		r    func() result
		want string
	}{
		{"verify, a layout without oci:", func() result { return cruxprov(t, "image", "verify", lay+d, "--key", pub) },
			"usage: " + lay + d + " is not an image reference (an OCI layout is named with oci: before its directory): " + how + "; " + lay + " is an OCI layout here: oci:" + lay + d + " (see 'cruxprov image verify --help')"},
		{"verify, no registry", func() result { return cruxprov(t, "image", "verify", "acme/echo"+d, "--key", pub) },
			"usage: acme/echo" + d + " is not an image reference (it names no registry): " + how + " (see"},
		{"verify, uppercase", func() result { return cruxprov(t, "image", "verify", "registry.example/Acme/echo"+d, "--key", pub) },
			"usage: registry.example/Acme/echo" + d + " is not an image reference (repository can only contain"},
		{"build, no registry", func() result { return build("debian" + d) },
			"usage: --base debian" + d + " is not an image reference (it names no registry): " + how + " (see 'cruxprov image build --help')"},
		{"build, oci: alone", func() result { return build("oci:" + d) },
			"usage: --base oci:" + d + " is not an image reference (oci: names no layout directory)"},
		{"install, no registry", func() result {
			return cruxprov(t, "install", whl, "--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
				"--backend", "container", "--image", "acme/echo"+d)
		}, "usage: --image acme/echo" + d + " is not an image reference (it names no registry): " + how},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r()
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("want exit 64 and %q\ngot %+v", c.want, r)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Fatal("the build wrote its --output")
	}
}

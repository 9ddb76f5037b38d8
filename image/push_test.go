package image

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestParsePush: a --push value with or without a tag; a registry's
// port is not a tag; a digest or a malformed name is an error.
func TestParsePush(t *testing.T) {
	for _, c := range []struct{ in, repo, tag string }{
		{"registry.example/acme/echo", "registry.example/acme/echo", ""},
		{"registry.example/acme/echo:1.0", "registry.example/acme/echo", "1.0"},
		{"127.0.0.1:5000/acme/echo", "127.0.0.1:5000/acme/echo", ""},
		{"127.0.0.1:5000/acme/echo:1.0", "127.0.0.1:5000/acme/echo", "1.0"},
		{"localhost:5000/echo", "localhost:5000/echo", ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			r, tag, err := ParsePush(c.in)
			if err != nil || r.Name() != c.repo || tag != c.tag {
				t.Errorf("%s: %s %q %v", c.in, r.Name(), tag, err)
			}
		})
	}
	for _, bad := range []string{"", "registry.example/acme/echo@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Registry.example/ACME/echo", "registry.example/acme/echo:", "registry.example/acme/echo:a:b"} {
		t.Run("bad "+bad, func(t *testing.T) {
			if r, tag, err := ParsePush(bad); err == nil {
				t.Errorf("%q: %s %q", bad, r.Name(), tag)
			}
		})
	}
}

// TestParsePushUppercase: an uppercase letter in the repository
// (registry.example/Acme/echo) was "tag must be between 1 and 128
// characters in length", go-containerregistry's word for the tag it
// then tried: it says the repository must be lowercase, and which part
// is not. The registry's host is not case-sensitive, and is accepted.
func TestParsePushUppercase(t *testing.T) {
	for _, c := range []struct{ in, part string }{
		{"registry.example/Acme/echo", "Acme"},
		{"registry.example/Acme/echo:1.0", "Acme"},
		{"127.0.0.1:5000/acme/Echo", "Echo"},
		{"localhost:5000/acme/echo-Two:1.0", "echo-Two"},
		{"Acme/echo", "Acme"},
	} {
		t.Run(c.in, func(t *testing.T) {
			_, _, err := ParsePush(c.in)
			want := fmt.Sprintf("push destination %q: the repository's path component %q has uppercase letters; a repository is lowercase (OCI distribution spec: path components of [a-z0-9]+ joined by '.', '_', '__' or '-'): give %q", c.in, c.part, strings.ToLower(c.part))
			if err == nil || err.Error() != want {
				t.Errorf("%v\nwant %s", err, want)
			}
		})
	}
	if r, _, err := ParsePush("Registry.example/acme/echo"); err != nil {
		t.Errorf("an uppercase registry host: %s %v", r.Name(), err)
	}
	// A component wrong for more than its case is not said to be
	// uppercase only.
	if _, _, err := ParsePush("Bad Repo"); err == nil || strings.Contains(err.Error(), "uppercase") {
		t.Errorf("%v", err)
	}
	// No tag given: the repository's own error, not the empty tag's.
	if _, _, err := ParsePush("registry.example/acme/echo!"); err == nil || strings.Contains(err.Error(), "tag must be") {
		t.Errorf("%v", err)
	}
}

// TestShimForAnotherMachine: a cruxshim built for arm64 given for an
// x86_64 platform (and the reverse) is platform_unsupported, before the
// base is read; so is one the image could not start at all: not ELF (a
// PEM key, a shell script, an empty file), an ELF that is not an
// executable, or a dynamically linked program (/usr/bin/ls). They were
// built into the image, whose ENTRYPOINT then failed to start.
func TestShimForAnotherMachine(t *testing.T) {
	fx, client := testIndex(t)
	dir, h := testBase(t)
	bad := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(bad, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shim, err := os.ReadFile(testShim(t))
	if err != nil {
		t.Fatal(err)
	}
	rel := append([]byte(nil), shim...)
	rel[16] = byte(elf.ET_REL) // e_type, little-endian
	// Every case names make's command for the platform's architecture,
	// whose bytes every runner gets (docs/ci.md), never a go build of
	// one's own: the one named before left out make build's flags, so it
	// gave another cruxshim and another image digest.
	cases := []struct{ pid, shim, says string }{
		{testPlatform, imagetest.ShimFor(t, "arm64"), "for EM_AARCH64"},
		{testPlatformARM, testShim(t), "for EM_X86_64"},
		{testPlatform, file("key.pem", []byte("-----BEGIN PUBLIC KEY-----\nMCow\n-----END PUBLIC KEY-----\n")), "not an ELF executable"},
		{testPlatform, file("script", []byte("#!/bin/sh\nexec \"$@\"\n")), "not an ELF executable"},
		{testPlatform, file("empty", nil), "not an ELF executable"},
		{testPlatform, file("rel.o", rel), "not an executable"},
	}
	if runtime.GOARCH == "amd64" {
		if ls, err := exec.LookPath("ls"); err == nil {
			cases = append(cases, struct{ pid, shim, says string }{testPlatform, ls, "linked dynamically"})
		}
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.shim)+" for "+c.pid, func(t *testing.T) {
			st, err := store.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = Build(context.Background(), st, Options{
				Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path), Platforms: []string{c.pid},
				Client: client, Base: LayoutPrefix + dir + "@" + h.String(), Shims: map[string]string{"": c.shim},
				Epoch: time.Unix(1700000000, 0), Tool: testTool, BuilderID: "https://ci.example/builder", Output: filepath.Join(t.TempDir(), "oci"),
			})
			if refusal.CodeOf(err) != refusal.PlatformUnsupported || !strings.Contains(err.Error(), "cruxshim "+c.shim) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s with the cruxshim %s: %v, want platform_unsupported saying %q", c.pid, c.shim, err, c.says)
			}
			arch := "amd64"
			if c.pid == testPlatformARM {
				arch = "arm64"
			}
			if err != nil && (!strings.Contains(err.Error(), "make bin/cruxshim-"+arch+" (docs/ci.md)") || strings.Contains(err.Error(), "go build")) {
				t.Errorf("%s with the cruxshim %s: %v, want make bin/cruxshim-%s as the way to build one", c.pid, c.shim, err, arch)
			}
		})
	}
}

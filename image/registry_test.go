package image

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

// startDockerRegistry runs a docker-registry without auth for the test
// (imagetest.DockerRegistry); it returns host:port.
func startDockerRegistry(t *testing.T) string {
	t.Helper()
	return imagetest.DockerRegistry(t, "", "")
}

// inFront serves a loopback proxy in front of the registry at upstream
// (a URL) and returns the proxy's host:port: answer sees each request
// first and answers it itself when it returns true (a redirect, an
// error, a cut connection, a hostile document); the registry answers the
// others.
func inFront(t *testing.T, upstream string, answer func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !answer(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestRegistries: the signed image pushed to go-containerregistry's
// in-memory registry and to a real docker-registry verifies by digest;
// skopeo and umoci read what was pushed; a tag re-pushed with other
// content is refused, as is a reference without a digest.
func TestRegistries(t *testing.T) {
	key := testKey(t)
	mem := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(mem.Close)
	hosts := map[string]string{"in-memory": strings.TrimPrefix(mem.URL, "http://")}
	if _, err := exec.LookPath("docker-registry"); err == nil {
		hosts["docker-registry"] = startDockerRegistry(t)
	} else {
		t.Log("docker-registry is not installed: testing the in-memory registry only")
	}
	for kind, host := range hosts {
		t.Run(kind, func(t *testing.T) {
			repo := host + "/acme/echo"
			start := time.Now()
			res := build(t, buildCase{push: repo + ":1.0", key: key})
			t.Logf("build and push: %v (%+v)", time.Since(start), res.Timings)
			defer func(start time.Time) { t.Logf("checks: %v", time.Since(start)) }(time.Now())
			d := res.Digest
			if res.Repo != repo {
				t.Errorf("signed for %s", res.Repo)
			}
			o := VerifyOptions{Keys: []*sign.PublicKey{key.Public()}}
			if _, err := Verify(context.Background(), repo+"@"+d.String(), o); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if _, err := Verify(context.Background(), repo+":1.0", o); refusal.CodeOf(err) != refusal.BaseImageUnpinned {
				t.Errorf("a tag alone: %v", err)
			}
			// The tag re-pushed with other content: the pinned digest still
			// verifies; the tag's new digest has no valid signature.
			img, _ := random.Image(512, 1)
			tag, _ := name.NewTag(repo + ":1.0")
			if err := remote.Write(tag, img); err != nil {
				t.Fatal(err)
			}
			nd, _ := img.Digest()
			if _, err := Verify(context.Background(), repo+":1.0@"+d.String(), o); err != nil {
				t.Errorf("the pinned digest after the tag moved: %v", err)
			}
			if _, err := Verify(context.Background(), repo+"@"+nd.String(), o); refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
				t.Errorf("the re-pushed tag's content: %v", err)
			}
			// The pushed signature under another repository's name.
			o.Repo = host + "/acme/other"
			if _, err := Verify(context.Background(), repo+"@"+d.String(), o); refusal.CodeOf(err) != refusal.ImageSignatureInvalid {
				t.Errorf("signature checked against another repository: %v", err)
			}
			if kind == "docker-registry" {
				oracles(t, "docker://"+repo+"@"+d.String(), d.String(), false)
			}
		})
	}
}

// oracles checks an image with skopeo (inspect, copy to a layout) and
// umoci (unpack, when asked: it takes seconds), where they are installed.
func oracles(t *testing.T, ref, digest string, unpack bool) {
	t.Helper()
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Log("skopeo is not installed: no oracle")
		return
	}
	// An auth file of its own: skopeo otherwise reads
	// $XDG_RUNTIME_DIR/containers/auth.json, or /run/containers/<uid>/,
	// which a user without a login session cannot read.
	auth := []string{"REGISTRY_AUTH_FILE=" + filepath.Join(t.TempDir(), "auth.json")}
	inspect := exec.Command(skopeo, "inspect", "--tls-verify=false", ref)
	inspect.Env = append(os.Environ(), auth...)
	out, err := inspect.CombinedOutput()
	if err != nil || !strings.Contains(string(out), digest) || !strings.Contains(string(out), LabelPackage) {
		t.Fatalf("skopeo inspect %s: %v: %s", ref, err, out)
	}
	dir := filepath.Join(t.TempDir(), "copy")
	cp := exec.Command(skopeo, "copy", "--src-tls-verify=false", "--preserve-digests", ref, "oci:"+dir+":img")
	cp.Env = append(os.Environ(), auth...)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v: %s", err, out)
	}
	if !unpack {
		return
	}
	umoci, err := exec.LookPath("umoci")
	if err != nil {
		t.Log("umoci is not installed: no unpack oracle")
		return
	}
	bundle := filepath.Join(testdir.New(t), "bundle") // the env in it is read-only
	args := []string{"unpack", "--image", dir + ":img", bundle}
	if os.Geteuid() != 0 {
		args = append(args[:1], append([]string{"--rootless"}, args[1:]...)...) // no chown
	}
	if out, err := exec.Command(umoci, args...).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v: %s", err, out)
	}
	for _, p := range []string{ShimPath, EnvPath + "/pyvenv.cfg", MetaDir + "/seal.json", MetaDir + "/provider.toml"} {
		if _, err := os.Stat(filepath.Join(bundle, "rootfs", p)); err != nil {
			t.Errorf("unpacked image: %v", err)
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(bundle, "rootfs", EnvPath, "pyvenv.cfg")); err != nil || !strings.Contains(string(cfg), "home = /usr/bin\n") {
		t.Errorf("pyvenv.cfg: %q (%v)", cfg, err)
	}
}

// TestPushByDigest: --push REPO without a tag pushes by digest alone (a
// single-platform image and an index, to a real docker-registry on
// host:port, whose colon is no tag): the image verifies and pulls by its
// digest, and the repository has no tag but the signature's and
// attestation's.
func TestPushByDigest(t *testing.T) {
	if _, err := exec.LookPath("docker-registry"); err != nil {
		t.Skip("docker-registry is not installed (apt-get install docker-registry): no real registry to test against")
	}
	host := startDockerRegistry(t)
	key := testKey(t)
	ctx := context.Background()
	check := func(t *testing.T, repo string, res *Result) {
		t.Helper()
		d := res.Digest
		if res.Repo != repo || len(res.References) != 1 || res.References[0] != repo+"@"+d.String() {
			t.Errorf("repo %s, references %v", res.Repo, res.References)
		}
		ref, err := name.NewDigest(repo+"@"+d.String(), name.StrictValidation)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(ref)
		if err != nil {
			t.Fatalf("pull by digest: %v", err)
		}
		if desc.Digest != d || desc.MediaType != res.MediaType {
			t.Errorf("pulled %s %s, built %s %s", desc.MediaType, desc.Digest, res.MediaType, d)
		}
		if _, err := Verify(ctx, repo+"@"+d.String(), VerifyOptions{Keys: []*sign.PublicKey{key.Public()}}); err != nil {
			t.Errorf("verify: %v", err)
		}
		r, _ := name.NewRepository(repo)
		tags, err := remote.List(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range tags {
			if !strings.HasPrefix(tag, "sha256-") {
				t.Errorf("pushed without a tag, the repository has the tag %q (%v)", tag, tags)
			}
		}
	}
	t.Run("image", func(t *testing.T) {
		repo := host + "/acme/echo"
		check(t, repo, build(t, buildCase{push: repo, key: key}))
	})
	t.Run("index", func(t *testing.T) {
		fx, client := testIndex(t)
		baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(t.TempDir(), "base"))
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		repo := host + "/acme/native"
		res, err := Build(ctx, st, Options{
			Root: pipelinetest.OpenRoot(t, st, fx.Native.Path), Platforms: []string{testPlatform, testPlatformARM},
			Client: client, Base: baseRef, Shims: map[string]string{testPlatform: testShim(t), testPlatformARM: imagetest.ShimFor(t, "arm64")},
			Epoch: time.Unix(1700000000, 0), Key: key, BuilderID: "https://ci.example/builder", Tool: testTool,
			Push: repo,
		})
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if res.MediaType != types.OCIImageIndex {
			t.Fatalf("a %s", res.MediaType)
		}
		check(t, repo, res)
	})
}

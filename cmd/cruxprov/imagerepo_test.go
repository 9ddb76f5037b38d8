package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestImagePushSignsWherePushed: image build --push REPO --repo OTHER
// signed the image for OTHER, pushed it to REPO and said "signed for
// OTHER", exit 0; every verifier pulling it from REPO then refused it.
// Now it is a usage error naming both, exit 64, before anything is built
// or pushed (the registry stays empty); --repo naming --push's repository
// builds. And the verifiers do refuse an image in REPO whose signature
// and attestations name OTHER (the same build, signed into a layout for
// OTHER, its .sig and .att copied over REPO's): image verify, install
// --backend container --image and verify --backend container of the pin
// approved before, each image_signature_invalid naming both repositories.
// A real docker-registry on loopback.
func TestImagePushSignsWherePushed(t *testing.T) {
	host := imagetest.DockerRegistry(t, "", "")
	baseLayout, baseDigest := imagetest.Base(t)
	dir := testdir.New(t) // install makes read-only envs in its home
	fx, idx := fixtureindex.Serve(t, dir)
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "builder.key"), filepath.Join(dir, "builder.pub")
	os.WriteFile(keyPath, priv, 0o600)
	os.WriteFile(pubPath, pub, 0o644)
	home := filepath.Join(dir, "home")
	env := append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000", "CRUXPROV_KEY_PASSWORD=pw", "DOCKER_CONFIG="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	run := func(a ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	repo, other := host+"/acme/echo", host+"/acme/other"
	build := func(a ...string) result {
		return run(append([]string{"image", "build", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform,
			"--base", "oci:" + baseLayout + "@" + baseDigest.String(), "--shim", imagetest.Shim(t), "--sign-key", keyPath}, a...)...)
	}

	r := build("--push", repo+":1.0", "--repo", other)
	if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "usage: --repo "+other+" is not the repository of --push "+repo+":1.0 ") {
		t.Errorf("--push %s:1.0 --repo %s: %+v", repo, other, r)
	}
	resp, err := http.Get("http://" + host + "/v2/_catalog")
	if err != nil {
		t.Fatal(err)
	}
	var catalog struct{ Repositories []string }
	json.NewDecoder(resp.Body).Decode(&catalog)
	resp.Body.Close()
	if len(catalog.Repositories) != 0 {
		t.Errorf("the refused build pushed %v", catalog.Repositories)
	}

	// --repo naming --push's repository: the signature names it.
	r = build("--push", repo+":1.0", "--repo", repo)
	d := ok(r, "--push REPO:1.0 --repo REPO")
	if !strings.Contains(d, "signed for "+repo+":") {
		t.Errorf("build: %s", d)
	}
	d = ok(build("--push", repo+":1.0", "--quiet"), "build --push REPO:1.0")
	ok(run("image", "verify", repo+"@"+d, "--key", pubPath), "image verify")

	// The builder trusted, the image proposed from REPO and approved.
	aliceKey := approveBuilder(t, run, dir, pubPath)
	var doc struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	install := []string{"install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", repo + "@" + d, "--python", debian}
	if err := json.Unmarshal([]byte(ok(run(append(install, "--json")...), "install --image REPO@DIGEST")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", aliceKey, "--quiet"), "approve the install")
	ok(run("verify", "acme-echo", "--backend", "container"), "verify --backend container")

	// The same build signed for OTHER into a layout; its signature and
	// attestations put in REPO over the image's own.
	out := filepath.Join(dir, "oci")
	if ld := ok(build("--output", "oci:"+out, "--repo", other, "--quiet"), "build --output --repo OTHER"); ld != d {
		t.Fatalf("the layout's build is %s, the pushed one %s", ld, d)
	}
	h, err := v1.NewHash(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{image.SignatureTag(h), image.AttestationTag(h)} {
		imgs := imagetest.TaggedImages(t, out, tag)
		if len(imgs) == 0 {
			t.Fatalf("the layout has no %s", tag)
		}
		img := imgs[len(imgs)-1]
		ref, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	says := "a signature for the repository " + other + ", not " + repo
	for _, c := range []struct {
		what string
		args []string
	}{
		{"image verify", []string{"image", "verify", repo + "@" + d, "--key", pubPath}},
		{"install --backend container --image", install},
		{"verify --backend container", []string{"verify", "acme-echo", "--backend", "container"}},
	} {
		if r := run(c.args...); r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: "+string(refusal.ImageSignatureInvalid)+": ") || !strings.Contains(r.stderr, says) {
			t.Errorf("%s of an image in %s signed for %s: %+v", c.what, repo, other, r)
		}
	}
}

// approveBuilder readies the store run acts on for an install --backend
// container of the fixture (fixtureindex.Serve's, in dir): an approver,
// alice (her keys in dir), trusted first, the builder key pubPath
// proposed with the builder role and approved by her, and the fixture's
// interfaces registered; it returns her private key's path.
func approveBuilder(t *testing.T, run func(...string) result, dir, pubPath string) (aliceKey string) {
	t.Helper()
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r.stdout
	}
	alice := filepath.Join(dir, "alice")
	ok(run("key", "generate", "--out", alice, "--quiet"), "key generate")
	ok(run("key", "trust", alice+".pub", "--name", "alice"), "key trust alice")
	var doc struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	if err := json.Unmarshal([]byte(ok(run("key", "trust", pubPath, "--name", "ci", "--role", "builder", "--json"), "key trust ci")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the builder")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok(run("interface", "register", i, "--schema", filepath.Join(dir, "fx", "interfaces", i+".json"), "--quiet"), "interface register "+i)
	}
	return alice + ".key"
}

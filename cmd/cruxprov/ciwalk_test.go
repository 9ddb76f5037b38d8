package main

// What a CI pipeline author meets following docs/ci.md and docs/images.md
// word for word.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestMakeBuildReproducible: `make build` gives the same cruxshim bytes
// (which every image embeds, so its digest depends on them) whatever the
// builder's GOFLAGS say about VCS stamping (ci.md, "Binaries"). Go stamps
// the git revision, its time and whether the tree is modified into a
// binary unless -buildvcs=false: root's go env here sets it, a CI
// runner's or another user's does not, and the same commit then gave
// other bytes and another image digest.
func TestMakeBuildReproducible(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The Makefile's own build command, as `make build` runs it.
	mk := exec.Command("make", "-s", "--no-print-directory", "--eval", "print-build: ; @echo \"$(BUILD)\"", "print-build")
	mk.Dir = root
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make print-build: %v", err)
	}
	build := strings.TrimSpace(string(out))
	if !strings.Contains(build, " build ") {
		t.Fatalf("the Makefile's BUILD: %q", build)
	}
	dir := t.TempDir()
	sum := map[string][32]byte{}
	for _, vcs := range []string{"auto", "false"} {
		p := filepath.Join(dir, "cruxshim-vcs-"+vcs)
		cmd := exec.Command("bash", "-c", build+" -o "+p+" ./cmd/cruxshim")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs="+vcs)
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s (GOFLAGS=-buildvcs=%s): %v: %s", build, vcs, err, se.String())
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum[vcs] = sha256.Sum256(b)
	}
	if sum["auto"] != sum["false"] {
		t.Errorf("make build's cruxshim differs with GOFLAGS=-buildvcs=auto and =false (%x, %x): the Makefile leaves VCS stamping to the environment", sum["auto"], sum["false"])
	}
}

// TestImageVerifyPrivateKey: the builder's private key given to image
// verify --key (a CI author swapping builder.key and builder.pub) is a
// usage error that says so, exit 64; it printed the refusal code
// signer_untrusted inside a usage line ("usage: --key builder.key:
// signer_untrusted: not a PEM \"PUBLIC KEY\" block").
func TestImageVerifyPrivateKey(t *testing.T) {
	dir := t.TempDir()
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "builder.key")
	os.WriteFile(key, priv, 0o600)
	junk := filepath.Join(dir, "junk.pub")
	os.WriteFile(junk, []byte("not a key\n"), 0o644)
	ref := "oci:" + dir + "@sha256:" + strings.Repeat("0", 64)
	r := cruxprov(t, "image", "verify", ref, "--key", key)
	if r.code != exitUsage || !strings.Contains(r.stderr, "is a private key") || !strings.Contains(r.stderr, ".pub") || strings.Contains(r.stderr, "signer_untrusted") {
		t.Errorf("a private key: %+v", r)
	}
	r = cruxprov(t, "image", "verify", ref, "--key", junk)
	if r.code != exitUsage || !strings.Contains(r.stderr, "is not a public key") || strings.Contains(r.stderr, "signer_untrusted") {
		t.Errorf("not a key: %+v", r)
	}
}

// TestInstallImageSignedByApprover: CI signed the image with an
// approver's key (the operator's, trusted as approver) instead of its
// builder key. install --backend container refuses it,
// image_signature_invalid, naming the key and its role; it said only "no
// valid signature under a trusted key ([a signature under no trusted
// key])" of a key the operator does trust.
func TestInstallImageSignedByApprover(t *testing.T) {
	baseLayout, baseDigest := imagetest.Base(t)
	base, _, fx, idx, shim := imageSetup(t, "cruxprov-ciwalk-")
	home := t.TempDir()
	run := func(a ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000")
		return runCmd(t, cmd)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	alice := filepath.Join(t.TempDir(), "alice")
	ok(run("key", "generate", "--out", alice, "--quiet"), "key generate")
	ok(run("key", "trust", alice+".pub", "--name", "alice"), "key trust alice")
	var cs struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	if err := json.Unmarshal([]byte(ok(run("key", "trust", filepath.Join(base, "builder.pub"), "--name", "ci", "--role", "builder", "--json"), "key trust ci")), &cs); err != nil || cs.ChangeSet.Metadata.ID == "" {
		t.Fatalf("key trust ci: %v", err)
	}
	ok(run("changeset", "approve", cs.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the builder")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok(run("interface", "register", i, "--schema", filepath.Join(base, "fx", "interfaces", i+".json"), "--quiet"), "interface register "+i)
	}
	out := filepath.Join(t.TempDir(), "oci")
	d := ok(run("image", "build", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform,
		"--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", shim, "--output", "oci:"+out,
		"--sign-key", alice+".key", "--repo", "localhost/acme/echo", "--quiet"), "image build signed by alice")
	r := run("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+d, "--python", debian)
	if r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.ImageSignatureInvalid)) ||
		!strings.Contains(r.stderr, "alice") || !strings.Contains(r.stderr, "approver") || !strings.Contains(r.stderr, "--role builder") {
		t.Errorf("install of an image an approver signed: %+v", r)
	}
}

// TestContainerPrivateRegistry: the CI pushes to a registry that wants
// credentials (a real docker-registry with htpasswd auth), given in the
// docker config (DOCKER_CONFIG) as images.md says; the operator's
// install --backend container and the executor's run --backend container
// (verify, then podman pull, then the run) use the same docker config.
// Only image build and image verify read it: install was refused
// fetch_failed ("the registry was not reached"), and podman ran with
// PATH alone, so its pull could not find DOCKER_CONFIG either.
func TestContainerPrivateRegistry(t *testing.T) {
	for _, b := range []string{"docker-registry", "podman", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed", b)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("runs podman as root (rootless podman here cannot hold the run's limits: executor.md)")
	}
	imagetest.Base(t)
	base, _, fx, idx, shim := imageSetup(t, "cruxprov-ciwalk-auth-")
	host := imagetest.DockerRegistry(t, "ci", "s3cret")
	docker := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("ci:s3cret"))
	os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600)
	home, state := t.TempDir(), t.TempDir()
	// An epoch of this run's own: an image podman cannot have already.
	epoch := fmt.Sprint(1700000000 + time.Now().UnixNano()%1000000)
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH="+epoch, "XDG_STATE_HOME="+state)
	run := func(creds bool, a ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = env
		if creds {
			cmd.Env = append(cmd.Env, "DOCKER_CONFIG="+docker)
		}
		return runCmd(t, cmd)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	var doc struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	repo := host + "/acme/echo"
	baseLayout, baseDigest := imagetest.Base(t)
	d := ok(run(true, "image", "build", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform,
		"--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", shim, "--push", repo,
		"--sign-key", filepath.Join(base, "builder.key"), "--builder-id", "https://ci.example/builder", "--quiet"), "image build --push")
	t.Cleanup(func() {
		out, _ := exec.Command("podman", "images", "--quiet", "--no-trunc", "--filter", "reference="+repo).Output()
		for _, id := range strings.Fields(string(out)) {
			exec.Command("podman", "rmi", id).Run() // not --force: a container of it is not ours to remove
		}
	})
	alice := filepath.Join(t.TempDir(), "alice")
	ok(run(false, "key", "generate", "--out", alice, "--quiet"), "key generate")
	ok(run(false, "key", "trust", alice+".pub", "--name", "alice"), "key trust alice")
	if err := json.Unmarshal([]byte(ok(run(false, "key", "trust", filepath.Join(base, "builder.pub"), "--name", "ci", "--role", "builder", "--json"), "key trust ci")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run(false, "changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the builder")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok(run(false, "interface", "register", i, "--schema", filepath.Join(base, "fx", "interfaces", i+".json"), "--quiet"), "interface register "+i)
	}
	install := []string{"install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", repo + "@" + d, "--python", debian, "--json"}
	if r := run(false, install...); r.code != exitRefused || !strings.Contains(r.stdout+r.stderr, "credentials") {
		t.Errorf("install without credentials: %+v", r)
	}
	if err := json.Unmarshal([]byte(ok(run(true, install...), "install with the docker config")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run(false, "changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the install")
	input := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(input, []byte(`{"private": "registry"}`), 0o644)
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("tok"), 0o600)
	out := ok(run(true, "run", "acme-echo", "echo", "--input", input, "--backend", "container", "--secret", "acme/api-token=@"+token), "run --backend container with the docker config")
	if !strings.Contains(out, `"private":"registry"`) {
		t.Errorf("run: %s", out)
	}
}

// TestImageBuildShimPlatforms: a --shim naming a platform that is not
// built was ignored (exit 0: an ignored flag fails open, DESIGN §13), and
// a platform left without a cruxshim was "error: cruxshim for P: is not
// given: …", exit 1, after the base was read; both are usage errors,
// exit 64, before anything is read.
func TestImageBuildShimPlatforms(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("\x7fELF"), 0o755)
	wheel := filepath.Join(dir, "acme_echo-1.0.0-py3-none-any.whl")
	os.WriteFile(wheel, []byte("PK"), 0o644)
	const x86, arm = "cp311-manylinux_2_36_x86_64", "cp311-manylinux_2_36_aarch64"
	common := []string{"image", "build", "--wheel", wheel, "--index", "http://127.0.0.1:9/simple/",
		"--base", "oci:" + dir + "@sha256:" + strings.Repeat("0", 64), "--output", "oci:" + filepath.Join(dir, "out")}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a shim for a platform not built", []string{"--platform", x86, "--shim", x86 + "=" + shim, "--shim", arm + "=" + shim}, arm + " is not a platform of --platform"},
		{"a platform without a shim", []string{"--platform", x86 + "," + arm, "--shim", arm + "=" + shim}, "no cruxshim for " + x86},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cruxprov(t, append(common, c.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%+v", r)
			}
		})
	}
}

// TestCIShimForAnotherArchIsMakeBuilds: the cruxshim ci.md builds for
// another architecture's image ("For several architectures", the command
// that writes bin/cruxshim-arm64) comes out of the Makefile's own build
// command, so it has the bytes `make build` gives that architecture on
// any runner. ci.md gave a `go build` line of its own, without the
// Makefile's -tags: run for amd64 here, its cruxshim differed from
// `make build`'s bin/cruxshim (the build info records the tags), so two
// runners, one following ci.md and one `make build`, pushed the same
// provider under two image digests. The doc's line is run as written,
// amd64 for arm64 (this machine's, so make build's bytes are at hand)
// and a temporary directory for bin/.
func TestCIShimForAnotherArchIsMakeBuilds(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe string
	for _, l := range strings.Split(string(doc), "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i]) // the shell comment the doc puts after it
		}
		if strings.Contains(l, "bin/cruxshim-arm64") && !strings.HasPrefix(l, "cruxprov") && !strings.HasPrefix(l, "--") {
			recipe = l
			break
		}
	}
	if recipe == "" {
		t.Fatal("docs/ci.md has no command that writes bin/cruxshim-arm64")
	}
	dir := t.TempDir()
	line := strings.ReplaceAll(strings.ReplaceAll(recipe, "arm64", "amd64"), "bin/", dir+"/")
	if strings.HasPrefix(line, "make ") {
		line = "make BIN=" + dir + " " + strings.TrimPrefix(line, "make ")
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ci.md's %q, run as %q: %v: %s", recipe, line, err, out)
	}
	// make build's cruxshim, as TestMakeBuildReproducible builds it.
	mk := exec.Command("make", "-s", "--no-print-directory", "--eval", "print-build: ; @echo \"$(BUILD)\"", "print-build")
	mk.Dir = root
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make print-build: %v", err)
	}
	want := filepath.Join(dir, "cruxshim-make-build")
	build := exec.Command("bash", "-c", strings.TrimSpace(string(out))+" -o "+want+" ./cmd/cruxshim")
	build.Dir = root
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build's cruxshim: %v: %s", err, out)
	}
	a, err := os.ReadFile(filepath.Join(dir, "cruxshim-amd64"))
	if err != nil {
		t.Fatalf("ci.md's %q wrote no cruxshim-amd64: %v", recipe, err)
	}
	b, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(a) != sha256.Sum256(b) {
		t.Errorf("ci.md's %q builds another cruxshim than make build (sha256 %x, make build's %x): an image built with it has another digest than one built with make build's", recipe, sha256.Sum256(a), sha256.Sum256(b))
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/podman"
	"github.com/cruxible/cruxprov/sign"
)

// TestPrivateCARegistry: an image in a registry under a private CA (a
// real docker-registry serving HTTPS alone, on 127.0.0.2, whose CA
// nothing on this host trusts). install --backend container --image
// trusted --ca-bundle for the index alone: the image was refused "this
// host does not trust the registry's TLS certificate", with no way to
// trust it but the system's trust store. Now install, verify and run
// --backend container trust --ca-bundle's CAs for the registry too
// (through image.Transport), and without it (or with a bundle of
// another CA) each is refused saying so and to run it again with
// --ca-bundle FILE; run's podman pull trusts the bundle too. So does
// image verify of the pushed image (a CI's check of what it pushed).
func TestPrivateCARegistry(t *testing.T) {
	host, ca := imagetest.TLSDockerRegistry(t)
	otherCA := imagetest.UntrustedCA(t)
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
	// An epoch of this run's own: an image podman cannot have already,
	// so that the run pulls it.
	epoch := fmt.Sprint(1700000000 + time.Now().UnixNano()%1000000)
	// A docker config of no credentials (podman's pull wants the file
	// DOCKER_CONFIG names to be there).
	docker := t.TempDir()
	os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{}}`), 0o644)
	env := append(os.Environ(), "SOURCE_DATE_EPOCH="+epoch, "CRUXPROV_KEY_PASSWORD=pw", "DOCKER_CONFIG="+docker, "XDG_STATE_HOME="+t.TempDir())
	runEnv := func(extra []string, a ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = append(env[:len(env):len(env)], extra...)
		return runCmd(t, cmd)
	}
	run := func(a ...string) result {
		t.Helper()
		return runEnv(nil, a...)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	const advice = "this host does not trust the registry's TLS certificate: trust the CA that signed it"
	const givenAdvice = "; the CA bundle given holds no CA that signed it"
	// refused checks r is the refusal of an untrusted registry
	// certificate whose remedy is the command again with --ca-bundle
	// FILE (a bundle given left out), followed by tail.
	refused := func(r result, what, command, tail string) {
		t.Helper()
		t.Logf("%s: %s", what, r.stderr)
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: fetch_failed: ") || !strings.Contains(r.stderr, advice) ||
			!strings.Contains(r.stderr, "; to fix: cruxprov --home "+home+" "+command+" ") || !strings.Contains(r.stderr, " --ca-bundle FILE"+tail) ||
			strings.Contains(r.stderr, otherCA) || strings.Count(r.stderr, "--ca-bundle") != 1 {
			t.Errorf("%s: %+v, want the certificate not trusted and %s again with --ca-bundle FILE", what, r, command)
		}
		// A bundle given is said to hold no CA that signed it: the
		// refusal read as the one without a bundle, as if it had gone
		// unread. Without one, nothing is said of a bundle.
		if given := strings.Contains(what, "another CA's bundle"); strings.Contains(r.stderr, givenAdvice) != given {
			t.Errorf("%s: %q, want %q said: %v", what, r.stderr, givenAdvice, given)
		}
	}

	repo := host + "/acme/echo"
	d := ok(run("image", "build", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform,
		"--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", imagetest.Shim(t), "--sign-key", keyPath,
		"--push", repo+":1.0", "--ca-bundle", ca, "--quiet"), "image build --push --ca-bundle")
	img := repo + "@" + d
	if _, err := exec.LookPath("podman"); err == nil {
		t.Cleanup(func() {
			out, _ := podmanAsRun("images", "--quiet", "--no-trunc", "--filter", "reference="+repo).Output()
			for _, id := range strings.Fields(string(out)) {
				podmanAsRun("rmi", id).Run() // not --force: a container of it is not ours to remove
			}
		})
	}

	// image verify of what was pushed, as a CI verifies it: the same
	// registry, the same advice (it took no --ca-bundle, so its refusal
	// named none and nothing but the system's trust store let it read
	// the image).
	imageVerify := []string{"image", "verify", img, "--key", pubPath}
	refused(run(imageVerify...), "image verify without --ca-bundle", "image verify", "")
	refused(run(append(imageVerify, "--ca-bundle", otherCA)...), "image verify with another CA's bundle", "image verify", "")
	if out := ok(run(append(imageVerify, "--ca-bundle", ca)...), "image verify --ca-bundle"); !strings.HasPrefix(out, "ok "+img+"\n") {
		t.Errorf("image verify --ca-bundle: %s", out)
	}
	// A layout is read from disk: a bundle there would be ignored.
	if r := run("image", "verify", "oci:"+baseLayout+"@"+baseDigest.String(), "--key", pubPath, "--ca-bundle", ca); r.code != exitUsage || !strings.Contains(r.stderr, "--ca-bundle is for an image in a registry") {
		t.Errorf("image verify oci:DIR --ca-bundle: %+v", r)
	}

	// The builder trusted, the interfaces registered.
	aliceKey := approveBuilder(t, run, dir, pubPath)
	var doc struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}

	install := []string{"install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", img, "--python", debian}
	refused(run(install...), "install without --ca-bundle", "install", "")
	refused(run(append(install, "--ca-bundle", otherCA)...), "install with another CA's bundle", "install", "")
	if err := json.Unmarshal([]byte(ok(run(append(install, "--ca-bundle", ca, "--json")...), "install --ca-bundle")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", aliceKey, "--quiet"), "approve the install")

	// The executor's verify: the same registry, the same advice.
	verify := []string{"verify", "acme-echo", "--backend", "container"}
	refused(run(verify...), "verify --backend container without --ca-bundle", "verify", "")
	refused(run(append(verify, "--ca-bundle", otherCA)...), "verify --backend container with another CA's bundle", "verify", "")
	if out := ok(run(append(verify, "--ca-bundle", ca)...), "verify --backend container --ca-bundle"); !strings.Contains(out, "image "+img) {
		t.Errorf("verify --backend container --ca-bundle: %s", out)
	}
	// A local env is verified on disk: a bundle there would be ignored.
	if r := run("verify", "acme-echo", "--ca-bundle", ca); r.code != exitUsage || !strings.Contains(r.stderr, "--ca-bundle is for --backend container") {
		t.Errorf("verify --backend local --ca-bundle: %+v", r)
	}
	input := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(input, []byte(`{"private": "ca"}`), 0o644)
	if r := run("run", "acme-echo", "echo", "--input", input, "--ca-bundle", ca); r.code != exitUsage || !strings.Contains(r.stderr, "--ca-bundle is for container runs") {
		t.Errorf("run --backend local --ca-bundle: %+v", r)
	}

	// The bundle podman's pull is to trust is written in TMPDIR: one that
	// cannot be written is refused, saying to name another.
	r := runEnv([]string{"TMPDIR=" + filepath.Join(dir, "nonexistent")}, "run", "acme-echo", "echo", "--input", input, "--backend", "container", "--ca-bundle", ca)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: container_unavailable: cannot write --ca-bundle's certificates for podman's pull") || !strings.Contains(r.stderr, "; to fix: TMPDIR=DIR cruxprov ") {
		t.Errorf("run --ca-bundle with a TMPDIR that is not there: %+v", r)
	}

	// The executor's run: the verify before it, and podman's pull, from
	// a registry podman speaks HTTPS to (127.0.0.2, not 127.0.0.1).
	for _, b := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s is not installed: install and verify checked, no container run", b)
		}
	}
	// Rootless too, when the test runs as a user with rootless podman
	// (as cruxprov-rootless): it skipped whenever not root, so a rootless
	// pull through a private CA (SSL_CERT_DIR naming the bundle's
	// directory, from the user's own podman) had never run.
	if os.Geteuid() != 0 {
		if b, err := podmanAsRun("info", "--format", "{{.Host.Security.Rootless}}").CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "true" {
			t.Skipf("install and verify checked; no container run: this user's rootless podman does not work (podman info: %v: %s; executor.md, Rootless: subordinate ids, uidmap)", err, b)
		}
	}
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("tok"), 0o600)
	runArgs := []string{"run", "acme-echo", "echo", "--input", input, "--backend", "container", "--secret", "acme/api-token=@" + token}
	refused(run(runArgs...), "run --backend container without --ca-bundle", "run", "; its receipt: ")
	refused(run(append(runArgs, "--ca-bundle", otherCA)...), "run --backend container with another CA's bundle", "run", "; its receipt: ")
	r = run(append(runArgs, "--ca-bundle", ca)...)
	if r.code == exitRefused && os.Geteuid() != 0 && strings.HasPrefix(r.stderr, "refused: container_unavailable: rootless podman") &&
		strings.Contains(r.stderr, " --ca-bundle "+ca+" --unenforced-limits; its receipt: ") {
		// Rootless podman that cannot hold the limits (cgroups v1, or
		// v2 without the controllers delegated): refused, then run as
		// the refusal says, without them (executor.md, Rootless 5).
		t.Logf("rootless podman without the limits: %s", strings.TrimSpace(r.stderr))
		runArgs = append(runArgs, "--unenforced-limits")
		r = run(append(runArgs, "--ca-bundle", ca)...)
	}
	if out := ok(r, "run --backend container --ca-bundle"); !strings.Contains(out, `"private":"ca"`) {
		t.Errorf("run --ca-bundle: %s", out)
	}

	// The CA in a PEM file named by SSL_CERT_FILE, as the refusal
	// advises, is trusted by the pull too (podman ran without it: the
	// verify passed, the pull was refused "x509: certificate signed by
	// unknown authority"). The image is removed from podman's storage
	// first, so that the run pulls it again.
	out, err := podmanAsRun("images", "--quiet", "--no-trunc", "--filter", "reference="+repo).Output()
	if err != nil || len(strings.Fields(string(out))) == 0 {
		t.Fatalf("podman images: %v %q: the run pulled nothing", err, out)
	}
	for _, id := range strings.Fields(string(out)) {
		if b, err := podmanAsRun("rmi", id).CombinedOutput(); err != nil {
			t.Fatalf("podman rmi %s: %v: %s", id, err, b)
		}
	}
	if out := ok(runEnv([]string{"SSL_CERT_FILE=" + ca}, runArgs...), "run --backend container, SSL_CERT_FILE the CA"); !strings.Contains(out, `"private":"ca"`) {
		t.Errorf("run, SSL_CERT_FILE: %s", out)
	}
}

// podmanAsRun is podman with the environment run --backend container
// gives it (PATH alone, without credentials or CAs): its storage is the
// one the run pulled into, the passwd entry's home's for a rootless
// user whatever this test's HOME is (executor.md, Rootless 2).
func podmanAsRun(a ...string) *exec.Cmd {
	cmd := exec.Command("podman", a...)
	cmd.Env = []string{podman.DefaultPath}
	return cmd
}

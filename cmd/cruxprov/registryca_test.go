package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/sign"
)

// TestPrivateCARegistry: an image in a registry under a private CA (a
// real docker-registry serving HTTPS alone, on 127.0.0.2, whose CA
// nothing on this host trusts). install --backend container --image
// trusted --ca-bundle for the index alone: the image was refused "this
// host does not trust the registry's TLS certificate", with no way to
// trust it but the system's trust store. Now install trusts
// --ca-bundle's CAs for the registry too (through image.Transport), and
// without it (or with a bundle of another CA) it is refused saying so
// and to run it again with --ca-bundle FILE.
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
	const advice = "this host does not trust the registry's TLS certificate: trust the CA that signed it"
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
	}

	repo := host + "/acme/echo"
	d := ok(run("image", "build", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform,
		"--base", "oci:"+baseLayout+"@"+baseDigest.String(), "--shim", imagetest.Shim(t), "--sign-key", keyPath,
		"--push", repo+":1.0", "--ca-bundle", ca, "--quiet"), "image build --push --ca-bundle")
	img := repo + "@" + d

	// The builder trusted, the interfaces registered.
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

	install := []string{"install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", img, "--python", debian}
	refused(run(install...), "install without --ca-bundle", "install", "")
	refused(run(append(install, "--ca-bundle", otherCA)...), "install with another CA's bundle", "install", "")
	if err := json.Unmarshal([]byte(ok(run(append(install, "--ca-bundle", ca, "--json")...), "install --ca-bundle")), &doc); err != nil {
		t.Fatal(err)
	}
	ok(run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet"), "approve the install")

}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/sign"
)

// TestOperatorInstallsAnImageIndex walks operator.md §8 as its operator
// does, root or not (TestImageMultiPlatformInstall runs as uid 65534 and
// so needs root): a store whose config.yaml is §6's (platforms: [host]),
// and the install of a signed image index of two architectures.
// config.yaml's [host] stands in for --platform and leaves out the arm64
// image: the refusal named the first such image alone, with no way on;
// it names each, and its fix line, run as printed, proposes both images.
// Then provider show, where install's warning of an image dropped sends
// the operator to name every --image again, lists each image by the
// reference --image takes: it showed the digest alone.
func TestOperatorInstallsAnImageIndex(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("needs %s", envPython)
	}
	dir := testdir.New(t)
	fx, idx := fixtureindex.Serve(t, dir)
	baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(dir, "base"))
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "builder.key"), priv, 0o600)
	os.WriteFile(filepath.Join(dir, "builder.pub"), pub, 0o644)
	home, out := filepath.Join(dir, "home"), filepath.Join(dir, "oci")
	env := []string{"CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000", "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	run, ok := homeRunner(t, home, env)
	idRE := regexp.MustCompile(`change-set (sha256:[0-9a-f]{64})`)
	approve := func(what, stdout string) {
		t.Helper()
		id := idRE.FindStringSubmatch(stdout)
		if id == nil {
			t.Fatalf("%s: no change-set proposed: %s", what, stdout)
		}
		ok("approve "+what, "changeset", "approve", id[1], "--key", filepath.Join(dir, "alice.key"), "--quiet")
	}

	var built struct {
		Digest    string
		Platforms []struct{ Platform, Digest string }
	}
	r := run("image", "build", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(), "--index", idx,
		"--platform", imagetest.Platform+","+imagetest.PlatformARM, "--base", baseRef,
		"--shim", imagetest.Platform+"="+imagetest.Shim(t), "--shim", imagetest.PlatformARM+"="+imagetest.ShimFor(t, "arm64"),
		"--output", "oci:"+out, "--sign-key", filepath.Join(dir, "builder.key"), "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil || len(built.Platforms) != 2 {
		t.Fatalf("image build: %+v", r)
	}
	ok("key generate", "key", "generate", "--out", filepath.Join(dir, "alice"), "--quiet")
	ok("key trust alice", "key", "trust", filepath.Join(dir, "alice.pub"), "--name", "alice")
	approve("the builder key", ok("key trust ci", "key", "trust", filepath.Join(dir, "builder.pub"), "--name", "ci", "--role", "builder"))
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok("interface register "+i, "interface", "register", i, "--schema", fx.Interfaces[i].Path, "--quiet")
	}
	// §6's config.yaml.
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("format: cruxprov.config/v1\nindex: "+idx+"\nplatforms: [host]\npython: "+envPython+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	index := "oci:" + out + "@" + built.Digest
	arm := built.Platforms[1]
	if arm.Platform != imagetest.PlatformARM {
		t.Fatalf("the index's second image is for %s", arm.Platform)
	}
	r = run("install", fx.Echo.Path, "--backend", "container", "--image", index, "--index", idx)
	if !strings.Contains(r.stderr, "refused: platform_unsupported: image oci:"+out+"@"+arm.Digest+" is for "+arm.Platform+", which is not among the platforms installed (host)") ||
		!strings.Contains(r.stderr, " --platform host,"+arm.Platform) {
		t.Fatalf("install of an index whose arm64 image config.yaml's platforms leave out: %+v", r)
	}
	f := runFix(t, r, dir, env...)
	if f.code != 0 {
		t.Fatalf("the fix line as printed: %+v", f)
	}
	approve("the install", f.stdout)

	shown := ok("provider show", "provider", "show", "acme-echo")
	for _, p := range built.Platforms {
		if line := "materialization container " + p.Platform + " " + p.Digest + " image oci:" + out + "@" + p.Digest + "\n"; !strings.Contains(shown, line) {
			t.Errorf("provider show does not list %s's image as --image takes it (%q): %s", p.Platform, line, shown)
		}
	}
}

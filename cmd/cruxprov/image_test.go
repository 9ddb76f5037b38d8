package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/schematest"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

const debian = "/usr/bin/python3.11"

// imageSetup is what the image CLI tests share: a directory nobody can
// read (base) with a copy of the binary (exe), the fixtures served as a
// pinned index under base (its URL idx, served until the test ends),
// cruxshim (shim), and a builder key pair at base/builder.key (password
// "pw") and .pub.
func imageSetup(t *testing.T, prefix string) (base, exe string, fx *fixtures.Set, idx, shim string) {
	t.Helper()
	base, exe = nobodyBase(t, prefix, debian)
	fx, idx = fixtureindex.Serve(t, base)
	shim = filepath.Join(base, "cruxshim")
	b, err := os.ReadFile(imagetest.Shim(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shim, b, 0o755); err != nil {
		t.Fatal(err)
	}
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(base, "builder.key"), priv, 0o644)
	os.WriteFile(filepath.Join(base, "builder.pub"), pub, 0o644)
	return base, exe, fx, idx, shim
}

// TestImageCLI: what CI runs, as uid 65534 owning its home: image build
// into a layout (signed, SOURCE_DATE_EPOCH), the same digest built by
// root in another home, image verify accepting it and refusing another
// repository, a base named without a digest, and env sbom of the same env
// built locally naming the image's materialization and being the image's
// SBOM attestation, valid CycloneDX 1.5 (the statements valid in-toto and
// SLSA provenance v1; internal/schematest, which CI has).
func TestImageCLI(t *testing.T) {
	baseLayout, baseDigest := imagetest.Base(t)
	base, exe, fx, idx, shim := imageSetup(t, "cruxprov-image-")
	baseRef := "oci:" + baseLayout + "@" + baseDigest.String()
	args := func(home, out string) []string {
		return []string{"--home", home, "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
			"--platform", imagetest.Platform, "--base", baseRef, "--shim", shim, "--output", "oci:" + out,
			"--sign-key", filepath.Join(base, "builder.key"), "--repo", "localhost/acme/echo", "--json"}
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000"}
	nobody := func(a ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe}, a...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	out := filepath.Join(base, "out")
	os.Mkdir(out, 0o755)
	os.Chown(out, 65534, 65534)
	r := nobody(args(home, filepath.Join(out, "oci"))...)
	var built struct {
		Digest    string
		Signed    bool
		Platforms []struct {
			Digest          string
			Materialization string
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil || !built.Signed || len(built.Platforms) != 1 {
		t.Fatalf("image build as nobody: %+v", r)
	}
	// What nobody wrote is nobody's, and readable by others.
	for _, p := range []string{filepath.Join(out, "oci", "index.json"), filepath.Join(out, "oci", "blobs", "sha256", strings.TrimPrefix(built.Digest, "sha256:"))} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || fi.Mode().Perm()&0o044 != 0o044 {
			t.Errorf("%s: uid %d mode %v", p, st.Uid, fi.Mode())
		}
	}
	// Root, another home, the same inputs: the same digest.
	cmd := exec.Command(exe, args(t.TempDir(), filepath.Join(t.TempDir(), "oci"))...)
	cmd.Env = env
	if r2 := runCmd(t, cmd); r2.code != 0 || !strings.Contains(r2.stdout, built.Digest) {
		t.Errorf("a second build in another home: %+v (want %s)", r2, built.Digest)
	}
	ref := "oci:" + filepath.Join(out, "oci") + "@" + built.Digest
	pubPath := filepath.Join(base, "builder.pub")
	if r := nobody("image", "verify", ref, "--key", pubPath, "--repo", "localhost/acme/echo"); r.code != 0 {
		t.Errorf("image verify: %+v", r)
	}
	if r := nobody("image", "verify", ref, "--key", pubPath, "--repo", "localhost/acme/other"); r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.ImageSignatureInvalid)) {
		t.Errorf("image verify for another repository: %+v", r)
	}
	a := args(home, filepath.Join(out, "tagged"))
	for i := range a {
		if a[i] == baseRef {
			a[i] = "oci:" + baseLayout
		}
	}
	if r := nobody(a...); r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.BaseImageUnpinned)) {
		t.Errorf("a base without a digest: %+v", r)
	}
	// The same env built locally: its SBOM names the image's materialization.
	r = nobody("--home", home, "env", "create", "--wheel", fx.Echo.Path, "--index", idx, "--platform", imagetest.Platform, "--python", debian, "--json")
	var created envCreated
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil {
		t.Fatalf("env create: %+v", r)
	}
	if created.Digest.String() != built.Platforms[0].Materialization {
		t.Errorf("local env %s, image env %s", created.Digest, built.Platforms[0].Materialization)
	}
	r = nobody("--home", home, "env", "sbom", created.Path)
	var bom struct {
		BOMFormat  string
		Components []struct{ Name, Version string }
		Metadata   struct {
			Properties []struct{ Name, Value string }
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &bom) != nil || bom.BOMFormat != "CycloneDX" || len(bom.Components) < 2 {
		t.Fatalf("env sbom: %+v", r)
	}
	if !strings.Contains(r.stdout, `"value": "`+built.Platforms[0].Materialization+`"`) {
		t.Errorf("env sbom does not name the materialization %s", built.Platforms[0].Materialization)
	}
	// env sbom's document is the image's CycloneDX attestation (compacted
	// as the statement's predicate), and both meet the CycloneDX 1.5
	// schema; the statements meet in-toto's (internal/schematest).
	h, err := v1.NewHash(built.Platforms[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	atts := imagetest.Attestations(t, filepath.Join(out, "oci"), image.AttestationTag(h))
	if len(atts) != 2 {
		t.Fatalf("%d attestations of %s, want the provenance and the SBOM", len(atts), h)
	}
	var st struct{ Predicate json.RawMessage }
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(r.stdout)); err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal(atts[image.CycloneDXType], &st) != nil || !bytes.Equal(st.Predicate, compact.Bytes()) {
		t.Errorf("env sbom is not the image's SBOM attestation:\n%s\n%s", r.stdout, atts[image.CycloneDXType])
	}
	schematest.InToto(t, atts[image.SLSAProvenanceType], atts[image.CycloneDXType])
	schematest.CycloneDX(t, []byte(r.stdout))
}

// TestImageMultiPlatformInstall: CI builds one provider (named
// NAME==VERSION --sha256, fetched from the index) for two architectures
// into an image index on a multi-platform base; an
// operator (uid 65534 owning its home) trusts the builder key, installs
// --backend container naming the index, and the change-set pins each
// platform's own manifest digest (the reference rewritten to it); once
// approved, verify --backend container accepts each platform, and asks
// for the platform when none is named.
func TestImageMultiPlatformInstall(t *testing.T) {
	base, exe, fx, idx, shim := imageSetup(t, "cruxprov-image-multi-")
	baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(base, "base"))
	for _, d := range []string{"home", "out", "keys", "state"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
		os.Chown(filepath.Join(base, d), 65534, 65534)
	}
	home := filepath.Join(base, "home")
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000"}
	nobody := func(a ...string) result {
		t.Helper()
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, a...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	ok := func(r result, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r.stdout
	}
	idOf := func(out, field string) string {
		t.Helper()
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		cs, _ := doc[field].(map[string]any)
		md, _ := cs["metadata"].(map[string]any)
		id, _ := md["id"].(string)
		if id == "" {
			t.Fatalf("no %s.metadata.id in %s", field, out)
		}
		return id
	}

	out := filepath.Join(base, "out", "oci")
	var built struct {
		Digest    string
		MediaType string `json:"media_type"`
		Platforms []struct{ Platform, Digest string }
	}
	// The root wheel named as install takes it: NAME==VERSION, only the
	// bytes of --sha256 (another sha256 is refused first).
	if r := nobody("image", "build", "acme-echo==1.0.0", "--sha256", strings.Repeat("0", 64), "--index", idx,
		"--platform", imagetest.Platform, "--base", baseRef, "--shim", shim, "--output", "oci:"+filepath.Join(base, "out", "x")); r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.FetchFailed)) {
		t.Errorf("image build NAME==VERSION with another sha256: %+v", r)
	}
	r := nobody("image", "build", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(), "--index", idx,
		"--platform", imagetest.Platform+","+imagetest.PlatformARM, "--base", baseRef,
		"--shim", imagetest.Platform+"="+shim, "--shim", imagetest.PlatformARM+"="+imagetest.ShimFor(t, "arm64"),
		"--output", "oci:"+out, "--sign-key", filepath.Join(base, "builder.key"), "--json")
	if json.Unmarshal([]byte(ok(r, "image build")), &built) != nil || len(built.Platforms) != 2 || !strings.Contains(built.MediaType, "index") {
		t.Fatalf("image build: %s", r.stdout)
	}

	alice := filepath.Join(base, "keys", "alice")
	ok(nobody("key", "generate", "--out", alice, "--quiet"), "key generate")
	ok(nobody("key", "trust", alice+".pub", "--name", "alice"), "key trust alice")
	cs := idOf(ok(nobody("key", "trust", filepath.Join(base, "builder.pub"), "--name", "ci", "--role", "builder", "--json"), "key trust ci"), "changeSet")
	ok(nobody("changeset", "approve", cs, "--key", alice+".key", "--quiet"), "approve the builder")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok(nobody("interface", "register", i, "--schema", filepath.Join(base, "fx", "interfaces", i+".json"), "--quiet"), "interface register "+i)
	}
	// The index and one of its own platforms' manifests: two images for
	// that platform, a pin no verify could choose from.
	if r := nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+built.Digest,
		"--image", "oci:"+out+"@"+built.Platforms[0].Digest, "--python", debian); r.code != exitUsage || !strings.Contains(r.stderr, "both hold an image for "+built.Platforms[0].Platform) {
		t.Errorf("install with two images for one platform: %+v", r)
	}
	r = nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container",
		"--image", "oci:"+out+"@"+built.Digest, "--python", debian, "--json")
	installed := ok(r, "install --backend container --image INDEX")
	for _, p := range built.Platforms {
		if !strings.Contains(installed, "oci:"+out+"@"+p.Digest) {
			t.Errorf("the change-set does not pin %s by its manifest %s: %s", p.Platform, p.Digest, installed)
		}
	}
	ok(nobody("changeset", "approve", idOf(installed, "changeSet"), "--key", alice+".key", "--quiet"), "approve the install")
	// provider show lists each image by the reference --image takes:
	// install's warning of an image dropped sends the operator there to
	// name every --image again, and it showed the digest alone, no
	// repository or layout to give.
	shown := ok(nobody("provider", "show", "acme-echo"), "provider show")
	for _, p := range built.Platforms {
		if line := "materialization container " + p.Platform + " " + p.Digest + " image oci:" + out + "@" + p.Digest + "\n"; !strings.Contains(shown, line) {
			t.Errorf("provider show does not list %s's image as --image takes it (%q): %s", p.Platform, line, shown)
		}
	}

	state := filepath.Join(base, "state")
	for _, p := range built.Platforms {
		v := ok(nobody("verify", "acme-echo", "--backend", "container", "--platform", p.Platform, "--state-dir", state, "--json"), "verify "+p.Platform)
		if !strings.Contains(v, p.Digest) {
			t.Errorf("verify %s does not name %s: %s", p.Platform, p.Digest, v)
		}
	}
	if r := nobody("verify", "acme-echo", "--backend", "container", "--state-dir", state); r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.PlatformUnsupported)) {
		t.Errorf("verify without a platform, two pinned: %+v", r)
	}

	// An update naming one of the two images drops the other: install
	// says so (only the diff showed it), on stderr and in --json's
	// warnings, and names only what is dropped.
	kept, dropped := built.Platforms[0], built.Platforms[1]
	r = nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+kept.Digest, "--python", debian)
	want := "warning: this change-set drops what acme-echo's accepted pin (revision "
	gone := "runs on: container " + dropped.Platform + " (image oci:" + out + "@" + dropped.Digest + "); "
	if r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, gone) || strings.Contains(r.stderr, kept.Platform+" (image") {
		t.Errorf("install dropping an image: %+v", r)
	}
	var doc struct{ Warnings []string }
	r = nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+kept.Digest, "--python", debian, "--json")
	if r.code != 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], gone) {
		t.Errorf("install --json dropping an image: %+v", r)
	}
	// Naming both again drops nothing.
	if r := nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+built.Digest, "--python", debian); r.code != 0 || strings.Contains(r.stderr, "drops") {
		t.Errorf("install naming every image again: %+v", r)
	}
	// A layout named by a relative path is pinned by its absolute one:
	// the pin held "oci:oci@…" as given, which verify and run read
	// against their own working directory (fetch_failed anywhere but
	// the installer's).
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home,
		"install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+filepath.Base(out)+"@"+built.Digest, "--python", debian, "--json")
	cmd.Env, cmd.Dir = env, filepath.Dir(out)
	r = runCmd(t, cmd)
	if r.code != 0 || !strings.Contains(r.stdout, `"oci:`+out+"@"+kept.Digest+`"`) || strings.Contains(r.stdout, `"oci:`+filepath.Base(out)+"@") {
		t.Errorf("install --image oci:RELATIVE@…: %+v", r)
	}

	// The platforms config.yaml gives (operator.md §6: [host]) are the
	// install's when --platform is not given, and leave out the index's
	// arm64 image: refused, saying which image and the platforms that
	// take them all, and the fix line, run as printed, proposes both
	// images. It named the first such image alone, with no way on.
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("format: cruxprov.config/v1\nplatforms: [host]\npython: "+debian+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = nobody("install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+built.Digest)
	_, fix, _ := strings.Cut(strings.TrimSpace(r.stderr), "; to fix: ")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: platform_unsupported: image oci:"+out+"@"+dropped.Digest+" is for "+dropped.Platform+", which is not among the platforms installed (host)") ||
		!strings.HasPrefix(fix, "cruxprov ") || !strings.Contains(fix, " install ") || !strings.Contains(fix, " --platform host,"+dropped.Platform) {
		t.Fatalf("install of an index with config.yaml's platforms leaving one out: %+v", r)
	}
	cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", exe+strings.TrimPrefix(fix, "cruxprov")+" --json")
	cmd.Env = env
	r = runCmd(t, cmd)
	for _, p := range built.Platforms {
		if r.code != 0 || !strings.Contains(r.stdout, `"oci:`+out+"@"+p.Digest+`"`) {
			t.Errorf("the fix line as printed does not pin %s's image: %+v", p.Platform, r)
		}
	}
}

// TestImageBuildRepeatedPlatform: --platform A --platform B is --platform
// A,B (as install and lock resolve take it): both platforms are built,
// so B's missing cruxshim is named before anything is read. A second
// --platform used to replace the first without a word. A platform named
// twice is a usage error.
func TestImageBuildRepeatedPlatform(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("x"), 0o755)
	build := func(platforms ...string) result {
		args := []string{"image", "build", "--wheel", filepath.Join(dir, "absent.whl"), "--index", "http://127.0.0.1:9/simple/",
			"--base", "oci:" + dir + "@sha256:" + strings.Repeat("0", 64), "--shim", imagetest.Platform + "=" + shim, "--output", "oci:" + filepath.Join(dir, "out")}
		for _, p := range platforms {
			args = append(args, "--platform", p)
		}
		return cruxprov(t, args...)
	}
	if r := build(imagetest.Platform, imagetest.PlatformARM); r.code != exitUsage || !strings.Contains(r.stderr, "usage: no cruxshim for "+imagetest.PlatformARM+": give --shim") {
		t.Errorf("--platform A --platform B: %+v, want B's cruxshim asked for", r)
	}
	if r := build(imagetest.Platform, imagetest.Platform); r.code != exitUsage || !strings.Contains(r.stderr, "usage: --platform "+imagetest.Platform+" is given twice") {
		t.Errorf("--platform A --platform A: %+v", r)
	}
}

// TestImageBuildBuilderIDIsAURI: --builder-id becomes the provenance's
// runDetails.builder.id, which SLSA provenance v1 wants a URI (in-toto's
// TypeURI): an id that is none ("ci-runner-7", one with a space or an
// uppercase host; an empty one was refused already) is a usage error before
// anything is read. It was written as given, and the provenance was
// invalid.
func TestImageBuildBuilderIDIsAURI(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	for _, id := range []string{"", "ci-runner-7", "https://ci.example/my builder", "HTTPS://CI.example/builder"} {
		r := cruxprov(t, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"),
			"--builder-id", id)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || !strings.Contains(r.stderr, "--builder-id") {
			t.Errorf("--builder-id %q: %+v", id, r)
		}
	}
}

// TestImageBuildOutputPlaceholder: image build --help shows --output's
// value as it is taken, oci:DIR. It showed "--output DIR", and a build
// given --output DIR, as shown, was a usage error, "--output must be
// oci:DIR" (walking docs/images.md).
func TestImageBuildOutputPlaceholder(t *testing.T) {
	r := runCmd(t, exec.Command(bin, "image", "build", "--help"))
	if r.code != 0 || !strings.Contains(r.stdout, "--output oci:DIR ") || strings.Contains(r.stdout, "--output DIR ") {
		t.Errorf("image build --help: %+v, want --output oci:DIR", r)
	}
}

// TestImageBuildPythonNotAbsolute: --python names a path in the image; a
// relative one (usr/bin/python3, the leading slash lost) went through the
// whole base read and then exited 1, "error: the interpreter path … is not
// an absolute path in the image", naming no flag. It is a usage error
// before anything is read.
func TestImageBuildPythonNotAbsolute(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	for _, p := range []string{"usr/bin/python3", "python3.11", "./python3"} {
		r := cruxprov(t, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"),
			"--builder-id", "https://ci.example/builder", "--python", p)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --python "+p+" is not an absolute path in the image (such as /usr/bin/python3.11)") {
			t.Errorf("--python %q: %+v", p, r)
		}
	}
}

// TestImageBuildOutputNotALayout: --output oci:DIR naming a directory of
// other files (no oci-layout file) is a usage error before anything is
// read, the directory left as it was; the image was written among them.
func TestImageBuildOutputNotALayout(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	out := filepath.Join(dir, "project")
	os.Mkdir(out, 0o755)
	os.WriteFile(filepath.Join(out, "main.go"), []byte("package main\n"), 0o644)
	r := cruxprov(t, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
		"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
		"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+out)
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --output oci:"+out+" is not an OCI image layout (it has no oci-layout file) and holds other files (main.go)") ||
		!strings.Contains(r.stderr, "name a new or empty directory, or an OCI image layout, to write it into") {
		t.Fatalf("%+v", r)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("the directory was written into: %v", ents)
	}
}

// TestImageBuildOutputSaysWhatIsWrong: an --output oci:DIR this user
// cannot write a layout at is a usage error before anything is read, one
// line that begins with the flag and DIR and says what is wrong: a file
// on its path (it was "stat DIR: not a directory", after "--output
// oci:DIR:"), a directory this user may not write or a parent in which
// it may not make it (it was found once the image was built), a
// read-only file system.
func TestImageBuildOutputSaysWhatIsWrong(t *testing.T) {
	dir := testdir.New(t)
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644)
	for _, d := range []string{"ro", "ro-layout"} {
		os.Mkdir(filepath.Join(dir, d), 0o555)
	}
	os.WriteFile(filepath.Join(dir, "ro-layout", "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o444)
	for _, c := range []struct {
		name, out, want string
		modes           bool // a mode root ignores: as another user only
		roFS            bool // a read-only tmpfs: as root only, who mounts it
	}{
		{name: "a file on its path", out: filepath.Join(dir, "afile", "out"), want: " cannot be a directory: " + filepath.Join(dir, "afile") + " on its path is a file; name a new or empty directory, or an OCI image layout"},
		{name: "an unwritable directory", out: filepath.Join(dir, "ro"), want: " is not writable by this user (uid ", modes: true},
		{name: "an unwritable layout", out: filepath.Join(dir, "ro-layout"), want: " is not writable by this user (uid ", modes: true},
		{name: "an unwritable parent", out: filepath.Join(dir, "ro", "a", "b"), want: " cannot be made by this user (uid " + fmt.Sprint(os.Geteuid()) + "): " + filepath.Join(dir, "ro") + " is not writable by it (permission denied)", modes: true},
		{name: "a read-only file system", want: "read-only file system", roFS: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.modes && os.Geteuid() == 0 {
				t.Skip("root writes whatever the modes")
			}
			if c.roFS {
				mnt := testdir.Tmpfs(t, "64k")
				if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
					t.Skipf("cannot remount a tmpfs read-only: %v %s", err, out)
				}
				c.out = filepath.Join(mnt, "out")
			}
			r := cruxprov(t, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
				"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
				"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+c.out)
			line := strings.TrimSpace(r.stderr)
			if r.code != exitUsage || !strings.HasPrefix(line, "usage: --output oci:"+c.out+" ") || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
				t.Fatalf("want exit %d and one line \"usage: --output oci:%s …%s…\", got %+v", exitUsage, c.out, c.want, r)
			}
		})
	}
}

// TestImageBuildEpochPastTar: a SOURCE_DATE_EPOCH a USTAR header cannot
// hold is a usage error before anything is read, not a refusal
// (materialize_failed) once the env was built.
func TestImageBuildEpochPastTar(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	for _, e := range []string{"8589934592", "9999999999"} {
		cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"))
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+e)
		if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, "SOURCE_DATE_EPOCH") {
			t.Errorf("SOURCE_DATE_EPOCH=%s: %+v", e, r)
		}
	}
}

// TestImageBuildEpochMalformed: SOURCE_DATE_EPOCH is decimal digits and
// nothing else (reproducible-builds.org, `date +%s`): a malformed one is a
// usage error that names it and says what it takes, before anything is
// read; "+5" and "-0" (which strconv.ParseInt takes) built at 5 and 0. One
// too large for an int64 is past what the tar headers hold, not "not an
// integer". Set but empty is unset (the build goes on to the --wheel,
// absent here).
func TestImageBuildEpochMalformed(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	build := func(e string) result {
		cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"))
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+e)
		return runCmd(t, cmd)
	}
	for _, e := range []string{"abc", "-1", "1e9", "+5", "-0", " 5", "5 ", "0x10", "1_000", "1700000000.5"} {
		if r := build(e); r.code != exitUsage || !strings.Contains(r.stderr, fmt.Sprintf("usage: SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970 in decimal digits", e)) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %+v", e, r)
		}
	}
	if r := build("99999999999999999999"); r.code != exitUsage || !strings.Contains(r.stderr, "is past 8589934591") {
		t.Errorf("SOURCE_DATE_EPOCH past an int64: %+v", r)
	}
	for _, e := range []string{"", "0", "1700000000"} {
		if r := build(e); r.code != exitUsage || strings.Contains(r.stderr, "SOURCE_DATE_EPOCH") || !strings.Contains(r.stderr, "no.whl") {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %+v, want it taken (and the absent --wheel refused)", e, r)
		}
	}
}

// TestImageBuildSignKeyMistakeNamesTheFlag: a public key (or no PEM key)
// given to image build's --sign-key is reported under --sign-key, the
// flag the user typed, not changeset approve's --key.
func TestImageBuildSignKeyMistakeNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	whl := filepath.Join(dir, "acme_echo-1.0.0-py3-none-any.whl")
	os.WriteFile(whl, []byte("not read before the key"), 0o644)
	_, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(dir, "builder.pub")
	os.WriteFile(pubPath, pub, 0o644)
	for _, k := range []string{pubPath, shim} {
		cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", whl,
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"),
			"--sign-key", k)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		if r := runCmd(t, cmd); r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --sign-key "+k+" ") {
			t.Errorf("--sign-key %s: %+v", k, r)
		}
	}
	// A wrong password names the key and says what to do: it said
	// "error: cannot decrypt the private key (wrong password?):
	// encrypted: decryption failed" (walking docs/images.md).
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "builder.key")
	os.WriteFile(keyPath, priv, 0o600)
	cmd := exec.Command(bin, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", whl,
		"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
		"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"),
		"--sign-key", keyPath)
	cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=not the password")
	if r := runCmd(t, cmd); r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: --sign-key "+keyPath+": cannot decrypt the private key (wrong password?)") ||
		!strings.Contains(r.stderr, "run the same command again with the password it was made with") {
		t.Errorf("--sign-key with a wrong password: %+v", r)
	}
}

// TestImagePushRefused: image build --push to a registry that is not
// there exits 78 with one line, `refused: push_failed: the push to the
// registry HOST failed: cannot push to REPO: …`, saying to check the
// registry's host and run the build again (with --json, the refusal on
// stdout); it exited 1 with a bare error, and was then fetch_failed, a
// fetch's code. The line says to which registry. A real docker-registry in
// read-only mode (405 to every upload) is a registry that takes no
// pushes, to push elsewhere or have them allowed: it said "the registry
// failed or refused the push … run the build again".
func TestImagePushRefused(t *testing.T) {
	baseLayout, baseDigest := imagetest.Base(t)
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	repo := host + "/acme/echo"
	l.Close()
	home := t.TempDir()
	if _, err := exec.LookPath("docker-registry"); err == nil {
		ro := imagetest.ReadOnlyDockerRegistry(t)
		cmd := exec.Command(bin, "--home", home, "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
			"--platform", imagetest.Platform, "--base", "oci:"+baseLayout+"@"+baseDigest.String(),
			"--shim", imagetest.Shim(t), "--push", ro+"/acme/echo:1.0")
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000", "DOCKER_CONFIG="+t.TempDir())
		r := runCmd(t, cmd)
		if r.code != exitRefused || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "refused: push_failed: the push to the registry "+ro+" failed: cannot push to "+ro+"/acme/echo: ") ||
			!strings.Contains(r.stderr, "the registry takes no pushes, HTTP 405: it is read-only") || !strings.Contains(r.stderr, "push to a registry that takes them") {
			t.Errorf("a read-only registry: %+v", r)
		}
	} else {
		t.Log("docker-registry is not installed: no read-only registry to push to")
	}
	for _, asJSON := range []bool{false, true} {
		args := []string{"--home", home, "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
			"--platform", imagetest.Platform, "--base", "oci:" + baseLayout + "@" + baseDigest.String(),
			"--shim", imagetest.Shim(t), "--push", repo + ":1.0"}
		if asJSON {
			args = append(args, "--json")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000", "DOCKER_CONFIG="+t.TempDir())
		r := runCmd(t, cmd)
		if r.code != exitRefused || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "refused: push_failed: the push to the registry "+host+" failed: cannot push to "+repo+": ") ||
			!strings.Contains(r.stderr, "not reached") || !strings.Contains(r.stderr, "run the build again") {
			t.Errorf("json=%v: %+v", asJSON, r)
		}
		if asJSON && !strings.Contains(r.stdout, `"code": "push_failed"`) {
			t.Errorf("json: %s", r.stdout)
		}
	}
}

// TestImageRepoNotARepository: --repo that is no repository (uppercase, a
// tag) is a usage error of image build (for a layout) and image verify,
// before anything is read: a layout was signed for it as typed, a
// signature no verifier could hold to a reference, and verify refused
// every signature for it.
func TestImageRepoNotARepository(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "cruxshim")
	os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
	pub := filepath.Join(dir, "builder.pub")
	os.WriteFile(pub, []byte("not read"), 0o644)
	for _, repo := range []string{"Acme/Echo", "acme/echo:1.0"} {
		r := cruxprov(t, "--home", filepath.Join(dir, "home"), "image", "build", "--wheel", filepath.Join(dir, "no.whl"),
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--shim", shim, "--output", "oci:"+filepath.Join(dir, "out"),
			"--builder-id", "https://ci.example/builder", "--repo", repo)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --repo: \""+repo+"\" is not a repository") {
			t.Errorf("image build --repo %q: %+v", repo, r)
		}
		r = cruxprov(t, "image", "verify", "oci:"+dir+"@sha256:"+strings.Repeat("0", 64), "--key", pub, "--repo", repo)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --repo: \""+repo+"\" is not a repository") {
			t.Errorf("image verify --repo %q: %+v", repo, r)
		}
	}
}

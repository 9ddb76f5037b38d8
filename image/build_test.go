package image

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/cruxible/cruxprov/store"
)

const testTool = "cruxprov-test"

type buildCase struct {
	home, out string
	wheel     string
	shim      string
	base      string
	key       *sign.PrivateKey
	push      string
	noCompile bool
	noCache   bool
}

// build runs Build with the fixture index for testPlatform.
func build(t *testing.T, c buildCase) *Result {
	t.Helper()
	fx, client := testIndex(t)
	dir, h := testBase(t)
	if c.home == "" {
		c.home = t.TempDir()
	}
	if c.wheel == "" {
		c.wheel = fx.Echo.Path
	}
	if c.shim == "" {
		c.shim = testShim(t)
	}
	if c.base == "" {
		c.base = LayoutPrefix + dir + "@" + h.String()
	}
	st, err := store.Open(c.home)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), st, Options{
		Root: pipelinetest.OpenRoot(t, st, c.wheel), Platforms: []string{testPlatform},
		Client: client, Base: c.base, Shims: map[string]string{"": c.shim},
		Epoch: time.Unix(1700000000, 0), Key: c.key, BuilderID: "https://ci.example/builder", Tool: testTool,
		Output: c.out, Push: c.push, NoCompile: c.noCompile, NoCache: c.noCache,
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return res
}

var (
	signedOnce sync.Once
	signedRes  *Result
	signedOut  string
	signedKey  *sign.PrivateKey
)

// signedBuild is one signed build into a layout, shared by the tests of
// a test binary (a build reads the whole base: seconds under -race).
func signedBuild(t *testing.T) (*Result, string, *sign.PrivateKey) {
	t.Helper()
	testBase(t)
	signedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cruxprov-image-signed-")
		if err != nil {
			t.Fatal(err)
		}
		signedOut = filepath.Join(dir, "oci")
		signedKey = testKey(t)
		signedRes = build(t, buildCase{out: signedOut, key: signedKey})
	})
	if signedRes == nil {
		t.Fatal("the shared signed build failed")
	}
	return signedRes, signedOut, signedKey
}

// TestBuildLayout: the image in a layout is an OCI manifest on the base,
// with the base's interpreter found in its files, that skopeo inspects
// and copies and umoci unpacks (env, shim, metadata in place).
func TestBuildLayout(t *testing.T) {
	res, out, _ := signedBuild(t)
	if res.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("media type %s", res.MediaType)
	}
	p := res.Platforms[0]
	if p.Interpreter.Path != "/usr/bin/python3.11" || p.Interpreter.Version != "3.11.2" {
		t.Errorf("interpreter %+v", p.Interpreter)
	}
	oracles(t, "oci:"+out+":acme-echo", res.Digest.String(), true)

	// The CMD is the executor's argv, plain -I -m whatever the runtime; the
	// provenance names the runtime (what tells the container executor how
	// to wire the channel).
	var prov Provenance
	if err := json.Unmarshal(p.prov, &prov); err != nil {
		t.Fatal(err)
	}
	if got := prov.Runtime(); got != python.RuntimeVersion {
		t.Errorf("the provenance names runtime %q, want %s", got, python.RuntimeVersion)
	}
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := lp.Image(p.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{EnvPath + "/bin/python", "-I", "-m", python.HarnessModule}; !slices.Equal(cf.Config.Cmd, want) || !slices.Equal(Harness, want) {
		t.Errorf("CMD %q, want %q", cf.Config.Cmd, want)
	}
}

// TestProvenanceRuntime: the runtime's version is read from the purl the
// provenance names its wheel by, whatever the name's spelling; none, "".
func TestProvenanceRuntime(t *testing.T) {
	var p Provenance
	if got := p.Runtime(); got != "" {
		t.Errorf("no dependencies: %q", got)
	}
	for _, w := range []seal.Package{
		{Name: "acme-echo", Version: "1.0.0"},
		{Name: "Cruxible_Provider.Runtime", Version: "0.2.0+local.1"},
	} {
		p.BuildDefinition.ResolvedDependencies = append(p.BuildDefinition.ResolvedDependencies, ResourceDescriptor{Name: w.Filename, URI: pypiPURL(w)})
	}
	p.BuildDefinition.ResolvedDependencies = append([]ResourceDescriptor{{Name: "base", URI: "oci://example/base"}}, p.BuildDefinition.ResolvedDependencies...)
	if got := p.Runtime(); got != "0.2.0+local.1" {
		t.Errorf("Runtime() = %q", got)
	}
}

// TestBuildEpochPastTar: an epoch a USTAR header cannot hold is refused
// before anything is read or materialized.
func TestBuildEpochPastTar(t *testing.T) {
	for _, e := range []int64{MaxEpoch + 1, -1} {
		_, err := Build(context.Background(), nil, Options{
			Platforms: []string{testPlatform}, Output: t.TempDir(), Base: "oci:/nonexistent@sha256:" + strings.Repeat("0", 64),
			Shims: map[string]string{"": "/nonexistent"}, Epoch: time.Unix(e, 0),
		})
		if err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
			t.Errorf("epoch %d: %v", e, err)
		}
	}
}

// TestBuildBuilderIDIsAURI: the library refuses a builder id that is no
// absolute URI before anything is read, as the CLI's --builder-id does (a
// program calling Build wrote it into the provenance as given).
func TestBuildBuilderIDIsAURI(t *testing.T) {
	for _, id := range []string{"", "ci-runner-7", "HTTPS://ci.example/b", "https://ci.example/a b"} {
		_, err := Build(context.Background(), nil, Options{
			Platforms: []string{testPlatform}, Output: t.TempDir(), Base: "oci:/nonexistent@sha256:" + strings.Repeat("0", 64),
			Shims: map[string]string{"": "/nonexistent"}, Epoch: time.Unix(1700000000, 0), BuilderID: id,
		})
		if err == nil || !strings.Contains(err.Error(), "the builder id") {
			t.Errorf("builder id %q: %v", id, err)
		}
	}
}

// TestBuildPlatformOfAnotherPython: a platform for another Python than
// the base's interpreter is refused interpreter_mismatch saying what to
// do, the platform of the base's Python named where it is a preset; it
// said only "the base's interpreter /usr/bin/python3.11 is Python
// 3.11.2, the platform cp312-manylinux_2_36_x86_64 is for 3.12".
func TestBuildPlatformOfAnotherPython(t *testing.T) {
	fx, client := testIndex(t)
	dir, h := testBase(t)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other := "cp312" + strings.TrimPrefix(testPlatform, "cp311")
	_, err = Build(context.Background(), st, Options{
		Root: pipelinetest.OpenRoot(t, st, fx.Echo.Path), Platforms: []string{other},
		Client: client, Base: LayoutPrefix + dir + "@" + h.String(), Shims: map[string]string{"": testShim(t)},
		BuilderID: "https://ci.example/builder", Tool: testTool, Output: filepath.Join(t.TempDir(), "oci"),
	})
	want := "is for 3.12: build for " + testPlatform + ", or on a base whose interpreter is Python 3.12"
	if refusal.CodeOf(err) != refusal.InterpreterMismatch || !strings.Contains(err.Error(), want) {
		t.Fatalf("Build for %s on a 3.11 base: %v, want interpreter_mismatch with %q", other, err, want)
	}
	if got := otherPython("cp312-musllinux_1_2_x86_64", "3.9", "3.12"); !strings.HasPrefix(got, "build for cp39-musllinux_1_2_x86_64, ") {
		t.Errorf("otherPython: %q", got)
	}
	if got := otherPython("cp312-nosuch_1_x86_64", "3.11", "3.12"); !strings.HasPrefix(got, "build for a platform for Python 3.11, ") {
		t.Errorf("otherPython, no such preset: %q", got)
	}
}

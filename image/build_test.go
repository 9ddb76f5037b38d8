package image

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	data, err := os.ReadFile(c.wheel)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), st, Options{
		WheelData: data, WheelName: filepath.Base(c.wheel), Platforms: []string{testPlatform},
		Client: client, Base: c.base, Shims: map[string]string{"": c.shim},
		Epoch: time.Unix(1700000000, 0), Key: c.key, BuilderID: "https://ci.example/builder", Tool: testTool,
		Output: c.out, Push: c.push,
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return res
}

func TestBuildLayout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "oci")
	if d := os.Getenv("IMAGE_TEST_KEEP"); d != "" {
		out = d
	}
	start := time.Now()
	res := build(t, buildCase{out: out})
	t.Logf("built %s in %v: %+v", res.Digest, time.Since(start), res.Timings)
	if res.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("media type %s", res.MediaType)
	}
	p := res.Platforms[0]
	if p.Interpreter.Path != "/usr/bin/python3.11" || p.Interpreter.Version != "3.11.2" {
		t.Errorf("interpreter %+v", p.Interpreter)
	}
	oracles(t, "oci:"+out+":acme-echo", res.Digest.String(), true)
}

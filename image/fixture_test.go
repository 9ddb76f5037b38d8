package image

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/schematest"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/store"
)

const testPlatform = imagetest.Platform

func testBase(t *testing.T) (string, v1.Hash) { return imagetest.Base(t) }
func testShim(t *testing.T) string            { return imagetest.Shim(t) }

var (
	fixturesOnce sync.Once
	fx           *fixtures.Set
	fxDir        string
	idxURL       string
	closeIdx     func()
)

// testIndex serves the fixture wheels as a pinned index, once per binary.
func testIndex(t *testing.T) (*fixtures.Set, *index.Client) {
	t.Helper()
	fixturesOnce.Do(func() {
		var err error
		if fxDir, err = os.MkdirTemp("", "cruxprov-image-fx-"); err != nil {
			panic(err)
		}
		if fx, idxURL, closeIdx, err = fixtureindex.Start(fxDir); err != nil {
			panic(err)
		}
	})
	c, err := index.New(idxURL, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fx, c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if closeIdx != nil {
		closeIdx()
	}
	if fxDir != "" {
		os.RemoveAll(fxDir)
	}
	imagetest.Cleanup()
	schematest.Cleanup()
	if signedOut != "" {
		os.RemoveAll(filepath.Dir(signedOut))
	}
	os.Exit(code)
}

// echoBuild is a store of the test's own and the Options that build the
// fixture echo provider's image for testPlatform on the test base, signed
// with a fresh key at a fixed epoch; a test sets what it varies (Push,
// Output, Key) on the copy it gets.
func echoBuild(t *testing.T) (*store.Store, Options) {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := echoOptions(t)
	o.Root = pipelinetest.OpenRoot(t, st, fx.Echo.Path)
	return st, o
}

// echoOptions is echoBuild's Options alone, for a test that builds into
// several stores: its Root is left for each (testRoot).
func echoOptions(t *testing.T) Options {
	t.Helper()
	_, client := testIndex(t)
	base, h := testBase(t)
	return Options{
		Platforms: []string{testPlatform}, Client: client, Base: LayoutPrefix + base + "@" + h.String(), Shims: map[string]string{"": testShim(t)},
		Epoch: time.Unix(1700000000, 0), Key: testKey(t), BuilderID: "https://ci.example/builder", Tool: testTool,
	}
}

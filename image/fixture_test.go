package image

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
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
	if signedOut != "" {
		os.RemoveAll(filepath.Dir(signedOut))
	}
	os.Exit(code)
}

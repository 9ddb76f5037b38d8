// Package pipelinetest holds what the tests of the pipeline's callers
// (pipeline, install, image) share to set one up: the root wheel of a
// file, read into a store as the CLI reads it. Tests only.
package pipelinetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/store"
)

// OpenRoot reads the root wheel at path into st (pipeline.OpenRoot, no
// digest expected), closed when the test ends; any error fails the test.
func OpenRoot(t testing.TB, st *store.Store, path string) *pipeline.RootWheel {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := pipeline.OpenRoot(context.Background(), st, f, filepath.Base(path), digest.Digest{})
	if err != nil {
		t.Fatalf("OpenRoot %s: %v", path, err)
	}
	t.Cleanup(root.Close)
	return root
}

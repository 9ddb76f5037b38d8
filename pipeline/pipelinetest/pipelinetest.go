// Package pipelinetest holds what the tests of the pipeline's callers
// (pipeline, install, image) share to set one up: the root wheel of a
// file, read into a store as the CLI reads it, and the switch that lets
// them take a provider without the runtime. Tests only: no command links
// it (internal/archtest).
package pipelinetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/pipeline/internal/runtimehook"
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

// WithoutRuntimeCheck lets pipeline.RequireRuntime, in this test binary
// and until the test ends, pass a provider whose lock resolves no runtime
// (cruxible-provider-runtime), which install and image build refuse
// runtime_missing otherwise: a pin or an image of it, as an older cruxprov
// or another tool made them, is what a test of a run's refusal needs.
func WithoutRuntimeCheck(t testing.TB) {
	t.Helper()
	runtimehook.NoRuntimeCheck.Store(true)
	t.Cleanup(func() { runtimehook.NoRuntimeCheck.Store(false) })
}

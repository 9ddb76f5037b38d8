package registry_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

func TestConformanceStub(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) registry.Registry { return registry.NewStub() })
}

func TestConformanceDir(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) registry.Registry {
		d, err := registry.OpenDir(context.Background(), filepath.Join(t.TempDir(), "registry"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// eachRegistry runs f as a subtest on a new Dir ("dir", in a temporary
// directory) and a new Stub ("stub"), for behaviour both must share.
func eachRegistry(t *testing.T, f func(t *testing.T, reg registry.Registry)) {
	t.Run("dir", func(t *testing.T) {
		d, err := registry.OpenDir(context.Background(), filepath.Join(t.TempDir(), "registry"))
		if err != nil {
			t.Fatal(err)
		}
		f(t, d)
	})
	t.Run("stub", func(t *testing.T) { f(t, registry.NewStub()) })
}

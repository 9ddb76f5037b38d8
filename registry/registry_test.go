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

package verify

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestNilRegistryRefused: Verify and CheckPin given no registry (a nil
// registry.Reader, or a nil *registry.Dir in one) refuse
// registry_corrupt; both panicked, ending an executor that stays up.
func TestNilRegistryRefused(t *testing.T) {
	for name, reg := range map[string]registry.Reader{"nil": nil, "nil *Dir": (*registry.Dir)(nil)} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Verify with a %s registry panicked: %v", name, r)
				}
			}()
			rep, err := Verify(context.Background(), reg, "p", Options{})
			if refusal.CodeOf(err) != refusal.RegistryCorrupt || rep == nil || rep.Spec != nil {
				t.Errorf("Verify with a %s registry: %+v, %v; want registry_corrupt", name, rep, err)
			}
		}()
	}
}

package registry_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestInterfaceIDAlphabet: an interface id is registered only in the
// alphabet a manifest can name it in (letters, digits, . _ - /,
// starting with a letter or digit), in a Dir and a Stub alike. Before,
// any id without whitespace was registered for good: a look-alike with
// a Cyrillic letter, one with a terminal escape that `interface list`
// and `registry log` printed, none of which a provider could use.
func TestInterfaceIDAlphabet(t *testing.T) {
	ctx := context.Background()
	schema := []byte(`{"type":"object"}`)
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	for name, reg := range map[string]registry.Registry{"dir": d, "stub": registry.NewStub()} {
		for _, id := range []string{"acme.ech\u043e", "acme\x1b[31m", "-acme", ".acme", "/acme", "acme;rm", "acme\u200becho", "Acme.échо"} {
			if _, err := reg.RegisterInterface(ctx, id, schema); refusal.CodeOf(err) != refusal.InterfaceInvalid {
				t.Errorf("%s: register %q = %v, want interface_invalid", name, id, err)
			}
		}
		for _, id := range []string{"acme.echo", "Acme.Echo", "cruxible.echo/v1", "a_b-c.d/v2"} {
			if _, err := reg.RegisterInterface(ctx, id, schema); err != nil {
				t.Errorf("%s: register %q: %v", name, id, err)
			}
		}
		if ifs, err := reg.Interfaces(ctx); err != nil || len(ifs) != 4 {
			t.Errorf("%s: %d interfaces registered (%v), want 4", name, len(ifs), err)
		}
	}
}

package verify

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// TestInStore: a pinned env is in the store at home when it is in its
// envs/, by that path or another to the same directory (a symlink to the
// store); anywhere else (the store the registry was copied from) it is
// pin_mismatch; no home checks nothing.
func TestInStore(t *testing.T) {
	if envsDir != store.EnvsDir {
		t.Fatalf("envsDir %q, the store keeps its envs in %q", envsDir, store.EnvsDir)
	}
	base := t.TempDir()
	home, other := filepath.Join(base, "home"), filepath.Join(base, "other")
	for _, h := range []string{home, other} {
		if err := os.MkdirAll(filepath.Join(h, "envs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	hex := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	t.Chdir(base)
	for _, tc := range []struct {
		name, env, home string
		ok              bool
	}{
		{"no store given", filepath.Join(other, "envs", hex), "", true},
		{"its own", filepath.Join(home, "envs", hex), home, true},
		{"its own, not yet built", filepath.Join(home, "envs", hex), home, true},
		{"through a symlink to the store", filepath.Join(link, "envs", hex), home, true},
		{"the store through a symlink", filepath.Join(home, "envs", hex), link, true},
		{"a relative home", filepath.Join(home, "envs", hex), "home", true},
		{"another store's", filepath.Join(other, "envs", hex), home, false},
		{"a store gone", filepath.Join(base, "gone", "envs", hex), home, false},
		{"not in envs/", filepath.Join(home, hex), home, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := InStore(tc.env, tc.home)
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, refusal.PinMismatch) {
				t.Errorf("InStore(%s, %s) = %v, want ok %v (else pin_mismatch)", tc.env, tc.home, err, tc.ok)
			}
		})
	}
}

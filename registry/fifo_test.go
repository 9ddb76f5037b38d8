package registry_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestFIFOInRegistryRefused: a FIFO put in place of the history or of a
// change-set is registry_corrupt at once. Before, the open of it waited
// for a writer for ever: cruxprov gc (which reads what the registry
// names) hung, as did every reader of the registry.
func TestFIFOInRegistryRefused(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"log.jsonl", "changesets/aaaa.yaml"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "registry")
			d, err := registry.OpenDir(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.Remove(p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			err = testdir.Returns(t, "the registry's reads", func() error {
				_, err := d.ChangeSets(ctx)
				if err == nil {
					_, err = d.Pins(ctx)
				}
				return err
			})
			if !errors.Is(err, refusal.RegistryCorrupt) {
				t.Errorf("got %v, want registry_corrupt", err)
			}
		})
	}
}

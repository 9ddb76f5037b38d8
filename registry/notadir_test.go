package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestOpenDirNotADirectory: a file or a FIFO where the registry keeps a
// directory (pins/, changesets/) is refused registry_corrupt saying what
// it is, with what to do, by a reader and a writer alike. A reader was
// told "is not a directory"; a writer "the registry has no directory …
// and it cannot be made: mkdir …: not a directory", though it was there.
func TestOpenDirNotADirectory(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		kind string
		make func(p string) error
	}{
		{"a regular file", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"a FIFO (named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
	} {
		t.Run(c.kind, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "registry")
			if err := os.MkdirAll(filepath.Join(root, "changesets"), 0o755); err != nil {
				t.Fatal(err)
			}
			pins := filepath.Join(root, "pins")
			if err := c.make(pins); err != nil {
				t.Fatal(err)
			}
			want := "the registry's " + pins + " is " + c.kind + ", not a directory"
			for name, open := range map[string]func(context.Context, string) (*registry.Dir, error){"OpenDir": registry.OpenDir, "OpenDirReadOnly": registry.OpenDirReadOnly} {
				_, err := open(ctx, root)
				if refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "move it aside") {
					t.Errorf("%s: %v, want registry_corrupt saying %q and what to do", name, err, want)
				}
			}
		})
	}
}

// TestLockFIFODoesNotHang: a FIFO at the registry's lock file is refused
// registry_corrupt at once, saying what it is, by every reader. A reader
// (registry log, key list, verify) hung in open(2) until a writer came,
// SIGTERM included.
func TestLockFIFODoesNotHang(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "registry")
	d, err := registry.OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	key := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, key.Key, "t"); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(root, ".lock")
	os.Remove(lock)
	if err := syscall.Mkfifo(lock, 0o644); err != nil {
		t.Fatal(err)
	}
	err = testdir.Returns(t, "Log with a FIFO at the lock", func() error {
		d, err := registry.OpenDirReadOnly(ctx, root)
		if err == nil {
			_, err = d.Log(ctx)
		}
		return err
	})
	if refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), lock+" is a FIFO (named pipe), not a regular file") || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("Log with a FIFO at the lock: %v, want registry_corrupt saying what it is", err)
	}
}

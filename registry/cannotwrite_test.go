package registry_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestCannotWriteIsNotCorrupt: a change this user may not write (a
// directory or file of the registry denied, a file system mounted
// read-only) is refused registry_write_failed, saying whether the change
// is recorded and what lets it through, where it was registry_corrupt,
// whose advice is to restore the registry from a copy: nothing is to be
// restored. A write that fails so past the commit point (the journal in
// place) says the change is recorded and that running the command again
// finishes it; an open that cannot finish such a change for the same
// reason says so (it was registry_corrupt, "cannot finish the registry
// change left unfinished"); with the write let through, the next open
// finishes it. Damage stays registry_corrupt.
func TestCannotWriteIsNotCorrupt(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"read-only file system", syscall.EROFS, "is mounted read-only: remount it read-write, then run the command again, which finishes it"},
		{"permission denied", syscall.EACCES, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			root := f.dir.Root()
			cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == "" {
				// This user's own pins/ (root: any user's, made so).
				want = "without write permission on " + filepath.Join(root, "pins") + ": give it back (chmod u+w " + filepath.Join(root, "pins") + ") and run the command again, which finishes it"
				if os.Geteuid() == 0 {
					want = "make " + filepath.Join(root, "pins") + " writable by this user (uid 0) and run the command again, which finishes it"
				}
			}
			denied := func(s string) error {
				if s == "file" {
					return &fs.PathError{Op: "open", Path: filepath.Join(root, "pins", ".tmp-1"), Err: c.err}
				}
				return nil
			}
			registry.SetCrashAt(denied)
			_, err = f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil)
			registry.SetCrashAt(nil)
			if refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "the change is recorded in the registry "+root+" (journal.json) but not all written") ||
				!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("the approval, its pin's write %v: %v (code %q), want registry_write_failed, recorded, %q", c.err, err, refusal.CodeOf(err), want)
			}
			// The owner's open cannot finish it for the same reason.
			registry.SetCrashAt(denied)
			_, err = registry.OpenDir(ctx, root)
			registry.SetCrashAt(nil)
			if refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "cannot finish the registry change recorded in "+filepath.Join(root, "journal.json")) ||
				!strings.Contains(err.Error(), want+" (the change is kept)") {
				t.Fatalf("open, the write still %v: %v (code %q), want registry_write_failed, the change kept", c.err, err, refusal.CodeOf(err))
			}
			d, err := registry.OpenDir(ctx, root)
			if err != nil {
				t.Fatalf("open with the write let through: %v", err)
			}
			if p, err := registry.VerifyPin(ctx, d, f.state, "acme-echo", time.Now()); err != nil || p.Revision != 3 {
				t.Fatalf("verify once finished: %+v %v", p, err)
			}
		})
	}

	// Damage is still registry_corrupt: a journal that does not parse,
	// and a history entry edited.
	t.Run("damage", func(t *testing.T) {
		f := newFixture(t)
		root := f.dir.Root()
		if err := os.WriteFile(filepath.Join(root, "journal.json"), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := registry.OpenDir(ctx, root); refusal.CodeOf(err) != refusal.RegistryCorrupt {
			t.Errorf("a journal that does not parse: %v, want registry_corrupt", err)
		}
		os.Remove(filepath.Join(root, "journal.json"))
		b, err := os.ReadFile(f.logPath())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.logPath(), []byte(strings.Replace(string(b), "acme-echo", "acme-ecHo", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := registry.OpenDir(ctx, root); refusal.CodeOf(err) != refusal.RegistryCorrupt {
			t.Errorf("a history edited: %v, want registry_corrupt", err)
		}
	})
}

// TestReadOnlyPartsOfItsOwner: this user's own registry with its
// history, pins/ or changesets/ made read-only (chmod a-w) is refused
// before the journal, registry_write_failed, nothing changed, saying to
// give the part its write permission back (chmod u+w PATH); Writable (what
// an approval asks before the key's password) says the same. A history
// made read-only passed the check of the directories, and the change
// stopped at its append, recorded and not finished. Reads go on. Skipped
// as root, which ignores modes (TestRegistryReadOnlyDirOfItsOwner runs
// the commands as another user).
func TestReadOnlyPartsOfItsOwner(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores modes: TestRegistryReadOnlyDirOfItsOwner runs this as another user")
	}
	ctx := context.Background()
	for _, part := range []string{"log.jsonl", "pins", "changesets"} {
		t.Run(part, func(t *testing.T) {
			f := newFixture(t)
			root := f.dir.Root()
			cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
			if err != nil {
				t.Fatal(err)
			}
			at := filepath.Join(root, part)
			mode := os.FileMode(0o555)
			if part == "log.jsonl" {
				mode = 0o444
			}
			if err := os.Chmod(at, mode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { testdir.Writable(root) })
			want := "it is this user's, without write permission on " + at + ": give it back (chmod u+w " + at + ") and run the command again"
			for name, err := range map[string]error{"Writable": f.dir.Writable(), "Approve": approveErr(ctx, f, cs)} {
				if refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "so nothing was changed") || !strings.Contains(err.Error(), want) {
					t.Errorf("%s with %s read-only: %v (code %q), want registry_write_failed, nothing changed, %q", name, part, err, refusal.CodeOf(err), want)
				}
			}
			if _, err := os.Stat(filepath.Join(root, "journal.json")); err == nil {
				t.Errorf("with %s read-only: the approval left its journal", part)
			}
			d, err := registry.OpenDir(ctx, root)
			if err != nil {
				t.Fatalf("open with %s read-only: %v", part, err)
			}
			if p, err := registry.VerifyPin(ctx, d, f.state, "acme-echo", time.Now()); err != nil || p.Revision != 2 {
				t.Fatalf("verify with %s read-only: %+v %v", part, p, err)
			}
		})
	}
}

func approveErr(ctx context.Context, f *fixture, cs *registry.ChangeSet) error {
	_, err := f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil)
	return err
}

package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// unreadableChildEnv hands TestRegistryUnreadableChild its directory.
const unreadableChildEnv = "CRUXPROV_REGISTRY_UNREADABLE_CHILD"

// unreadableCases are the parts of an accepted registry that
// TestRegistryUnreadableIsNotCorrupt denies its reader, each in a
// registry of its own under base/<name>: the path denied, relative to
// the registry, and the mode that denies it to another user; unfinished,
// a change recorded and not finished (its journal left in place), which
// a reader waits out on the lock.
var unreadableCases = []struct {
	name, deny string
	mode       os.FileMode
	unfinished bool
}{
	{"registry-directory", ".", 0o700, false},
	{"changesets", "changesets", 0o700, false},
	{"pin", "pins/acme-echo.json", 0o600, false},
	{"history", "log.jsonl", 0o600, false},
	// A reader that finds a change unfinished takes the lock shared to
	// tell a live writer's from one left unfinished; denied the lock, it
	// cannot tell. It was registry_corrupt, "a registry change was
	// interrupted", with the remedy repair_registry.
	{"unfinished-lock", ".lock", 0o600, true},
}

// TestRegistryUnreadableIsNotCorrupt: a registry this user may not read
// (an operator's registry directory of 0700, a pin or history file of
// 0600, read by an executor) is refused registry_unreadable, with the
// grant_read remedy naming the path that denied it. It was
// registry_corrupt ("which is not damage to the registry"), the code
// whose advice is to restore the registry from a trusted copy: one code
// for two meanings, which DESIGN §2 forbids. As root the registries are
// root's and the reads run as uid 65534 (root reads whatever the
// modes); as another user the registries are its own, denied by mode 0.
func TestRegistryUnreadableIsNotCorrupt(t *testing.T) {
	var base string
	if os.Geteuid() == 0 {
		asuser.Require(t, "read as an unprivileged user (root reads whatever the modes)")
		base = asuser.Dir(t, "cruxprov-registry-unreadable-")
	} else {
		base = t.TempDir()
	}
	t.Cleanup(func() { testdir.Writable(base) })
	for _, c := range unreadableCases {
		d := acceptedRegistry(t, filepath.Join(base, c.name))
		if c.unfinished {
			journal := fmt.Sprintf(`{"format":%q,"log_size":0,"log":"","files":[]}`, registry.JournalFormat)
			if err := os.WriteFile(filepath.Join(d.Root(), "journal.json"), []byte(journal), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mode := c.mode
		if os.Geteuid() != 0 {
			mode = 0 // its owner reads 0600 and 0700
		}
		if err := os.Chmod(filepath.Join(d.Root(), c.deny), mode); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		unreadableChild(t, base)
		return
	}
	asuser.RunTest(t, base, "TestRegistryUnreadableChild", unreadableChildEnv+"="+base)
}

// TestRegistryUnreadableChild is the unprivileged half of
// TestRegistryUnreadableIsNotCorrupt.
func TestRegistryUnreadableChild(t *testing.T) {
	base := os.Getenv(unreadableChildEnv)
	if base == "" {
		t.Skip("TestRegistryUnreadableIsNotCorrupt runs it as uid 65534")
	}
	unreadableChild(t, base)
}

func unreadableChild(t *testing.T, base string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Fatal("root reads whatever the modes: run as another user")
	}
	ctx := context.Background()
	for _, c := range unreadableCases {
		t.Run(c.name, func(t *testing.T) {
			root := filepath.Join(base, c.name, "registry")
			// What an executor reads: the registry opened, the pin
			// verified; and the change-sets, as changeset list does.
			d, err := registry.OpenDirReadOnly(ctx, root)
			if err == nil {
				_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
			}
			if err == nil {
				_, err = registry.CheckedChangeSets(ctx, d)
			}
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.RegistryUnreadable || errors.Is(err, refusal.RegistryCorrupt) {
				t.Fatalf("a registry denied at %s: %v (code %q), want registry_unreadable", c.deny, err, refusal.CodeOf(err))
			}
			if msg := err.Error(); !strings.Contains(msg, "permission denied to this user") || !strings.Contains(msg, "not damage to the registry") || strings.Contains(msg, "\n") {
				t.Errorf("the detail: %q", msg)
			}
			want := filepath.Clean(filepath.Join(root, c.deny))
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionGrantRead || rem.Target != want {
				t.Errorf("remedy %+v, want %s of %s", rem, refusal.ActionGrantRead, want)
			}
		})
	}
}

package registry_test

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// unwritableChildEnv hands TestOpenDirUnwritableChild its directory.
const unwritableChildEnv = "CRUXPROV_REGISTRY_UNWRITABLE_CHILD"

// TestOpenDirUnwritable: a registry no writer ever opened, in a store
// this user cannot write (an executor; `env create` leaves registry/
// empty), opens and reads as empty: it was refused registry_corrupt
// ("treat as tampering") because OpenDir could not make changesets/ and
// pins/. A mutation is refused registry_write_failed (it was
// registry_corrupt, "not damage", whose advice is to restore a copy),
// saying nothing was changed and what to do, and writes nothing. A directory this user
// cannot reach is registry_unreadable (it was registry_corrupt, "not
// damage", the same code's other meaning). Runs as uid
// 65534 when the test runs as root (root ignores modes).
func TestOpenDirUnwritable(t *testing.T) {
	var base string
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as an unprivileged user (root writes into a read-only directory)")
		base = asuser.Dir(t, "cruxprov-registry-unwritable-")
	} else {
		base = t.TempDir()
	}
	// empty/registry: there, empty, read-only (what env create leaves).
	// absent/: read-only, no registry in it.
	// hidden/registry: under a directory this user cannot enter.
	// locked/registry: whole, but its history log unreadable (mode 0).
	for _, d := range []string{"empty/registry", "absent", "hidden/registry", "locked/registry/changesets", "locked/registry/pins"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "locked/registry/log.jsonl"), []byte("{}\n"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testdir.Writable(base) })
	for d, mode := range map[string]os.FileMode{"empty/registry": 0o555, "empty": 0o555, "absent": 0o555, "hidden": 0} {
		if err := os.Chmod(filepath.Join(base, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		unwritableChild(t, base)
		return
	}
	asuser.RunTest(t, base, "TestOpenDirUnwritableChild", unwritableChildEnv+"="+base)
}

// TestOpenDirUnwritableChild is the unprivileged half of
// TestOpenDirUnwritable.
func TestOpenDirUnwritableChild(t *testing.T) {
	base := os.Getenv(unwritableChildEnv)
	if base == "" {
		t.Skip("TestOpenDirUnwritable runs it as uid 65534")
	}
	unwritableChild(t, base)
}

func unwritableChild(t *testing.T, base string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Fatal("root ignores the directories' modes: run as another user")
	}
	ctx := context.Background()
	for _, root := range []string{filepath.Join(base, "empty", "registry"), filepath.Join(base, "absent", "registry")} {
		t.Run(filepath.Base(filepath.Dir(root)), func(t *testing.T) {
			d, err := registry.OpenDir(ctx, root)
			if err != nil {
				t.Fatalf("OpenDir of a registry never written, read-only: %v", err)
			}
			if c, err := d.Chain(ctx); err != nil || len(c) != 0 {
				t.Errorf("Chain: %v, %v", c, err)
			}
			if l, err := d.Log(ctx); err != nil || len(l) != 0 {
				t.Errorf("Log: %v, %v", l, err)
			}
			if tr, err := d.Trust(ctx); err != nil || tr != nil {
				t.Errorf("Trust: %v, %v", tr, err)
			}
			if _, err := d.Pin(ctx, "acme-echo"); refusal.CodeOf(err) != refusal.PinUnapproved {
				t.Errorf("Pin: %v, want pin_unapproved (no pin)", err)
			}
			// What changeset list, provider list and gc read: nothing.
			if cs, err := d.ChangeSets(ctx); err != nil || len(cs) != 0 {
				t.Errorf("ChangeSets: %v, %v", cs, err)
			}
			if ps, err := d.Pins(ctx); err != nil || len(ps) != 0 {
				t.Errorf("Pins: %v, %v", ps, err)
			}
			if n, err := registry.NamedBy(ctx, d); err != nil || len(n.Envs)+len(n.Blobs) != 0 {
				t.Errorf("NamedBy: %+v, %v", n, err)
			}
			// A mutation cannot be made, and says so: not tampering.
			key := registrytest.NewKey(t, "root", registry.RoleApprover)
			_, err = d.TrustKey(ctx, key.Key, "t")
			// And why, with what to do (it said "an executor cannot change
			// the registry" to an operator whose home could not be made).
			why := map[string]string{"empty": "this registry is owned by ",
				"absent": "it does not exist and this user cannot make it: use a store in a directory this user can write"}[filepath.Base(filepath.Dir(root))]
			if uid, ok := ownerOf(root); ok && filepath.Base(filepath.Dir(root)) == "empty" {
				if uid == os.Geteuid() {
					// This user's own registry made read-only (the test
					// run as an unprivileged user, not as root's child):
					// "run as the store's owner" sent the owner to itself.
					why = "it is this user's, without write permission on " + root + ": give it back (chmod u+w " + root + ") and run the command again"
				} else {
					who, name := "uid "+strconv.Itoa(uid), "uid "+strconv.Itoa(uid)
					if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
						who = u.Username + " (uid " + strconv.Itoa(uid) + ")"
						name = u.Username
					}
					why = "this registry is owned by " + who + ", and this user (uid " + strconv.Itoa(os.Geteuid()) + ") may not write it: run the command as " + name + ", or ask them to"
				}
			}
			// A refusal (it was a plain error, exit 1, which a caller
			// could not tell from any other failure), registry_write_failed
			// (it was registry_corrupt, whose advice is to restore the
			// registry from a copy), saying nothing was changed and what
			// to do; where another user owns the registry, its remedy is
			// the change run as that owner.
			if refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "cannot record the change in the registry "+root+", so nothing was changed") ||
				!strings.Contains(err.Error(), why) || strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("TrustKey as a user who cannot write the registry: %v (code %q), want registry_write_failed saying nothing was changed, and %q", err, refusal.CodeOf(err), why)
			}
			rem := refusal.RemedyOf(err)
			if uid, ok := ownerOf(root); ok && uid != os.Geteuid() {
				if rem == nil || rem.Action != refusal.ActionRunAsOwner || rem.Target != strconv.Itoa(uid) {
					t.Errorf("remedy %+v, want run_as_owner uid %d", rem, uid)
				}
				if werr := d.Writable(); refusal.CodeOf(werr) != refusal.RegistryWriteFailed || refusal.RemedyOf(werr) == nil || refusal.RemedyOf(werr).Action != refusal.ActionRunAsOwner {
					t.Errorf("Writable: %v, want the refusal a change gets", werr)
				}
			} else if rem != nil {
				t.Errorf("remedy %+v, want none: this user owns it, or nobody does", rem)
			}
			ents, err := os.ReadDir(filepath.Dir(root))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ents); filepath.Base(filepath.Dir(root)) == "absent" && n != 0 {
				t.Errorf("the failed mutation wrote %v", ents)
			}
			if ents, _ := os.ReadDir(root); len(ents) != 0 {
				t.Errorf("the failed mutation wrote %v", ents)
			}
		})
	}
	// What this user may not read is said as such, with what to do, not
	// as damage to restore (it said "cannot read registry file …:
	// permission denied", whose remedy is "treat as tampering"), under a
	// code of its own: registry_unreadable, not registry_corrupt.
	for name, root := range map[string]string{"unreachable": "hidden/registry", "unreadable log": "locked/registry"} {
		t.Run(name, func(t *testing.T) {
			_, err := registry.OpenDir(ctx, filepath.Join(base, root))
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != refusal.RegistryUnreadable || !strings.Contains(err.Error(), "permission denied to this user") ||
				!strings.Contains(err.Error(), "not damage to the registry: run as a user who can read the store, or give it read access") {
				t.Errorf("OpenDir of a registry this user cannot read: %v, want registry_unreadable saying permission denied and what to do", err)
			}
			// And which path to give read access to: the directory this
			// user may not enter above the registry, or the log itself
			// (it named only the path read: "the registry directory
			// hidden/registry", whose own mode was 0755).
			want := map[string]string{"unreachable": filepath.Join(base, "hidden"), "unreadable log": filepath.Join(base, "locked/registry/log.jsonl")}[name]
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionGrantRead || rem.Target != want {
				t.Errorf("OpenDir of a registry this user cannot read: remedy %+v, want %s of %s", rem, refusal.ActionGrantRead, want)
			}
		})
	}
}

// ownerOf is the uid that owns p, and whether p is there.
func ownerOf(p string) (int, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid), true
}

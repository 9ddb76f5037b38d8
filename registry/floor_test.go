package registry_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// floorChildEnv hands TestFloorChild its registry and state directory.
const floorChildEnv = "CRUXPROV_REGISTRY_FLOOR_CHILD"

// acceptedRegistry is a Dir registry under parent with a root key and
// acme-echo accepted at revision 1, never verified (no floor anywhere).
func acceptedRegistry(t *testing.T, parent string) *registry.Dir {
	t.Helper()
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(parent, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Approve(ctx, cs.Metadata.ID, root.Priv, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// wantRefusal fails t unless err is a *refusal.Error with code.
func wantRefusal(t *testing.T, err error, code refusal.Code) {
	t.Helper()
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != code {
		t.Fatalf("got %v (%T), want a refusal %s", err, err, code)
	}
}

// TestFloorFailuresAreRefusals: a floor VerifyPin cannot read or write
// fails the verification with a typed refusal (ledger_write_failed, the
// code of the state directory the floor shares with the receipts ledger),
// and a registry file it cannot read is registry_corrupt — never a bare
// error. The read-only directory case runs as an unprivileged user (root
// writes into a 0555 directory): the test binary re-executed under
// setpriv as uid 65534 when the test runs as root.
func TestFloorFailuresAreRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("floor directory read-only", func(t *testing.T) {
		if os.Geteuid() != 0 {
			d := acceptedRegistry(t, t.TempDir())
			floorChild(t, d.Root(), t.TempDir())
			return
		}
		asuser.Require(t, "run as an unprivileged user (root writes into a read-only directory)")
		work := asuser.Dir(t, "cruxprov-registry-floor-")
		d := acceptedRegistry(t, work)
		state := filepath.Join(work, "state")
		if err := os.Mkdir(state, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(state, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		asuser.RunTest(t, work, "TestFloorChild", floorChildEnv+"="+d.Root()+string(os.PathListSeparator)+state)
	})
	t.Run("floors is a file", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		state := t.TempDir()
		if err := os.WriteFile(filepath.Join(state, "floors"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
		wantRefusal(t, err, refusal.LedgerWriteFailed)
	})
	t.Run("floor is a directory", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		state := t.TempDir()
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
			t.Fatal(err)
		}
		floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
		if len(floors) != 1 {
			t.Fatalf("floors %v", floors)
		}
		if err := os.Remove(floors[0]); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(floors[0], 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
		wantRefusal(t, err, refusal.LedgerWriteFailed)
	})
	// A damaged floor (cut short, emptied, another format) names its
	// file and what to do: it said "verifier floor: unexpected EOF".
	t.Run("floor damaged", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		state := t.TempDir()
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
			t.Fatal(err)
		}
		floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
		if len(floors) != 1 {
			t.Fatalf("floors %v", floors)
		}
		good, err := os.ReadFile(floors[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{good[:len(good)/2], nil, []byte(`{"format":"cruxible.floor/v9","length":1}`)} {
			if err := os.WriteFile(floors[0], b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
			wantRefusal(t, err, refusal.RegistryCorrupt)
			if msg := err.Error(); !strings.Contains(msg, floors[0]) || !strings.Contains(msg, "restore it from a backup, or remove it") {
				t.Errorf("a damaged floor (%q): %v", b, err)
			}
		}
	})
	// A FIFO at the floor's path is refused at once: verify hung in
	// open(2) until a writer came, SIGTERM included.
	t.Run("floor is a FIFO", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		state := t.TempDir()
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
			t.Fatal(err)
		}
		floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
		if len(floors) != 1 {
			t.Fatalf("floors %v", floors)
		}
		os.Remove(floors[0])
		if err := unix.Mkfifo(floors[0], 0o600); err != nil {
			t.Fatal(err)
		}
		err := testdir.Returns(t, "VerifyPin with a FIFO at the floor", func() error {
			_, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
			return err
		})
		wantRefusal(t, err, refusal.LedgerWriteFailed)
	})
	t.Run("pin file unreadable", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		pin := filepath.Join(d.Root(), "pins", "acme-echo.json")
		if err := os.Remove(pin); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(pin, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
		wantRefusal(t, err, refusal.RegistryCorrupt)
	})
	t.Run("history unreadable", func(t *testing.T) {
		d := acceptedRegistry(t, t.TempDir())
		log := filepath.Join(d.Root(), "log.jsonl")
		if err := os.Remove(log); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(log, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
		wantRefusal(t, err, refusal.RegistryCorrupt)
	})
}

// TestFloorChild is the unprivileged half of TestFloorFailuresAreRefusals.
func TestFloorChild(t *testing.T) {
	v := os.Getenv(floorChildEnv)
	if v == "" {
		t.Skip("TestFloorFailuresAreRefusals runs it as uid 65534")
	}
	reg, state, _ := strings.Cut(v, string(os.PathListSeparator))
	d, err := registry.OpenDir(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	floorChild(t, d.Root(), state)
}

// floorChild, as a user root's privileges do not cover, makes the
// floors directory read-only and checks that VerifyPin refuses
// ledger_write_failed and leaves no floor; then that a floor it cannot
// read is refused the same way.
func floorChild(t *testing.T, regRoot, state string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Fatal("root ignores the directory's mode: run as another user")
	}
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, regRoot)
	if err != nil {
		t.Fatal(err)
	}
	floors := filepath.Join(state, "floors")
	if err := os.Mkdir(floors, 0o555); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.LedgerWriteFailed)
	// The refusal carries its remedy (TestFloorRemedy): another state
	// directory, or the floors directory made writable. Only cmd/ said
	// what to do; a Go caller got no remedy.
	wantFloorRemedy(t, err, floors)
	if ents, _ := os.ReadDir(floors); len(ents) != 0 {
		t.Errorf("the read-only floors directory holds %v", ents)
	}
	// Writable again: the floor is written; then unreadable.
	if err := os.Chmod(floors, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(floors)
	if len(ents) != 1 {
		t.Fatalf("floors %v", ents)
	}
	p := filepath.Join(floors, ents[0].Name())
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.LedgerWriteFailed)
	wantFloorRemedy(t, err, p)
	// Said as a read, naming the file, its owner and mode, and what to
	// do: it said "make it writable", of a read.
	uid := os.Geteuid()
	want := fmt.Sprintf("cannot read the verifier floor %s: open %s: permission denied; this user (uid %d) may not read %s (its owner: uid %d, mode 0000): "+
		"this verifier's floors are kept in its state directory, which is to be this user's: have it made readable by this user again (its owner can: chown, chmod), "+
		"or give the verifier a state directory of its own, whose floor starts afresh", p, p, uid, p, uid)
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "writable") {
		t.Errorf("an unreadable floor: %v\nwant %q", err, want)
	}
	// A floors directory this user may not enter: that directory.
	os.Chmod(p, 0o644)
	if err := os.Chmod(floors, 0); err != nil {
		t.Fatal(err)
	}
	_, err = registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.LedgerWriteFailed)
	wantFloorRemedy(t, err, floors)
	if want := fmt.Sprintf("this user (uid %d) may not read %s (its owner: uid %d, mode 0000)", uid, floors, uid); !strings.Contains(err.Error(), want) {
		t.Errorf("a floors directory not entered: %v\nwant %q", err, want)
	}
	os.Chmod(floors, 0o755)
}

// wantFloorRemedy fails t unless err carries the set_state_dir remedy
// whose target is at.
func wantFloorRemedy(t *testing.T, err error, at string) {
	t.Helper()
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionSetStateDir || rem.Target != at {
		t.Errorf("%v: remedy %+v, want set_state_dir of %s", err, rem, at)
	}
}

// TestFloorRelativeStateDir: a state directory that is not an absolute
// path (an empty XDG_STATE_HOME joined with "cruxprov") is refused
// ledger_write_failed, nothing made; the floors were kept under the
// working directory, wherever the executor started.
func TestFloorRelativeStateDir(t *testing.T) {
	d := acceptedRegistry(t, t.TempDir())
	wd := t.TempDir()
	t.Chdir(wd)
	_, err := registry.VerifyPin(context.Background(), d, "cruxprov", "acme-echo", time.Now())
	wantRefusal(t, err, refusal.LedgerWriteFailed)
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Errorf("a relative state directory made %v in the working directory", ents)
	}
}

// TestFloorRemedy: a floor the file system refuses (permission denied,
// a read-only or full file system) is refused ledger_write_failed with
// the remedy set_state_dir, its target where the write was refused,
// whatever the user (root writes into a read-only directory, so the
// refusal is made here with the file system's errors); another failure
// carries none.
func TestFloorRemedy(t *testing.T) {
	d := acceptedRegistry(t, t.TempDir())
	state := t.TempDir()
	// floors a file: the floor's read is refused ENOTDIR; the file is
	// to be moved away, or another state directory given (it had no
	// remedy: TestFloorStateDirCannotBeMade).
	if err := os.WriteFile(filepath.Join(state, "floors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := registry.VerifyPin(context.Background(), d, state, "acme-echo", time.Now())
	wantRefusal(t, err, refusal.LedgerWriteFailed)
	wantFloorRemedy(t, err, filepath.Join(state, "floors"))
	for errno, want := range map[syscall.Errno]string{syscall.EACCES: state, syscall.EROFS: "/s/floors", syscall.ENOSPC: "/s/floors"} {
		err := registry.FloorRefusal(&registry.FloorError{Path: "/s/floors", Err: &fs.PathError{Op: "mkdir", Path: "/s/floors", Err: errno}})
		if errno == syscall.EACCES {
			err = registry.FloorRefusal(&registry.FloorError{Path: filepath.Join(state, "floors"), Err: &fs.PathError{Op: "mkdir", Path: filepath.Join(state, "floors"), Err: errno}})
		}
		wantFloorRemedy(t, err, want)
	}
}

// TestFloorRefusalSaysWhatToDo: a floor the file system refuses says
// in its words what the set_state_dir remedy is, for a Go executor that
// logs the line (only the CLI said it): the directory to make writable
// (where a floors directory not made yet is made, the floors directory
// a floor's temp file is refused in), the read-only or full file
// system, and another state directory; the cause once, never a flag.
func TestFloorRefusalSaysWhatToDo(t *testing.T) {
	state := "/s"
	floors := filepath.Join(state, "floors")
	floor := filepath.Join(floors, "0123.json")
	for _, c := range []struct {
		name string
		fe   *registry.FloorError
		want string
	}{
		{"floors not made", &registry.FloorError{Path: floors, Err: &fs.PathError{Op: "mkdir", Path: floors, Err: syscall.EACCES}},
			"ledger_write_failed: floor /s/floors: mkdir /s/floors: permission denied; this verifier's floors are kept in its state directory: make /s writable by this user, or give the verifier a state directory it can write"},
		{"floor's temp file", &registry.FloorError{Path: floor, Err: &fs.PathError{Op: "open", Path: filepath.Join(floors, ".tmp-0123.json-42"), Err: syscall.EACCES}},
			"ledger_write_failed: floor /s/floors/0123.json: open /s/floors/.tmp-0123.json-42: permission denied; this verifier's floors are kept in its state directory: make /s/floors writable by this user, or give the verifier a state directory it can write"},
		{"floors not opened", &registry.FloorError{Path: floors, Err: &fs.PathError{Op: "open", Path: floors, Err: syscall.EACCES}},
			"ledger_write_failed: floor /s/floors: open /s/floors: permission denied; this verifier's floors are kept in its state directory: make /s/floors writable by this user, or give the verifier a state directory it can write"},
		{"read-only", &registry.FloorError{Path: floors, Err: &fs.PathError{Op: "mkdir", Path: floors, Err: syscall.EROFS}},
			"ledger_write_failed: floor /s/floors: mkdir /s/floors: read-only file system; this verifier's floors are kept in its state directory, on a read-only file system: give the verifier a state directory on another"},
		{"full", &registry.FloorError{Path: floor, Err: &fs.PathError{Op: "write", Path: floor, Err: syscall.ENOSPC}},
			"ledger_write_failed: floor /s/floors/0123.json: write /s/floors/0123.json: no space left on device; free space on the file system of /s/floors/0123.json, or give the verifier a state directory on another"},
		{"a file in the way", &registry.FloorError{Path: floors, Err: &fs.PathError{Op: "mkdir", Path: floors, Err: syscall.ENOTDIR}},
			"ledger_write_failed: floor /s/floors: mkdir /s/floors: not a directory; /s/floors is a file where a directory of the verifier's state directory must be: move it away, or give the verifier a state directory it can write"},
		{"not made", &registry.FloorError{Path: floors, StateDir: state, Err: &fs.PathError{Op: "mkdir", Path: state, Err: syscall.ENOENT}},
			"ledger_write_failed: floor /s/floors: mkdir /s: no such file or directory; the verifier's state directory cannot be made at /s (its file system makes no directory there, as /proc does, or a link on its path leads nowhere): give the verifier a state directory that can be made"},
		{"other", &registry.FloorError{Path: floor, Err: &fs.PathError{Op: "read", Path: floor, Err: syscall.EIO}},
			"ledger_write_failed: floor /s/floors/0123.json: read /s/floors/0123.json: input/output error; mend the verifier's state directory, or give the verifier a state directory it can write"},
		{"not a path's", &registry.FloorError{Path: floor, Err: errors.New("no lock")},
			"ledger_write_failed: floor /s/floors/0123.json: no lock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := registry.FloorRefusal(c.fe).Error(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestFloorWriteRemovesDeadWritersTemps: a verifier killed while it
// raised its floor (between the temp file's create and its rename, as
// strace's SIGKILL at that rename of `cruxprov verify` does) left
// floors/.tmp-<hex>.json-N behind, and nothing ever removed it: one per
// kill, in every executor's state directory. The next floor write, which
// holds the floors directory's flock as every writer does for its whole
// write, removes them; other files stay.
func TestFloorWriteRemovesDeadWritersTemps(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	d := acceptedRegistry(t, parent)
	state := filepath.Join(parent, "state")
	floors := filepath.Join(state, "floors")
	if err := os.MkdirAll(floors, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(floors, ".tmp-0123abcd.json-42")
	other := filepath.Join(floors, "notes.txt")
	for _, p := range []string{dead, other} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead writer's temp file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file was removed: %v", err)
	}
}

// TestFloorOfAnotherRegistry: a floor file that names another registry
// than the one whose id it is kept under (copied from another registry's
// floor, a state directory moved between hosts) is registry_corrupt
// saying whose floor it is. Before, one whose length and head were this
// registry's was taken as this registry's floor (and written back over),
// and another registry's whole floor was reported as "the history forks".
func TestFloorOfAnotherRegistry(t *testing.T) {
	ctx := context.Background()
	a, b := acceptedRegistry(t, t.TempDir()), acceptedRegistry(t, t.TempDir())
	state := t.TempDir()
	now := time.Now()
	for _, d := range []*registry.Dir{a, b} {
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", now); err != nil {
			t.Fatal(err)
		}
	}
	chainA, _ := a.Chain(ctx)
	chainB, _ := b.Chain(ctx)
	pa := filepath.Join(state, "floors", chainA[0].Hex()+".json")
	pb := filepath.Join(state, "floors", chainB[0].Hex()+".json")
	own, err := os.ReadFile(pa)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(pb)
	if err != nil {
		t.Fatal(err)
	}
	relabeled := []byte(strings.Replace(string(own), chainA[0].String(), chainB[0].String(), 1))
	for name, data := range map[string][]byte{"another's floor": other, "relabeled": relabeled} {
		if err := os.WriteFile(pa, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := registry.VerifyPin(ctx, a, state, "acme-echo", now)
		wantRefusal(t, err, refusal.RegistryCorrupt)
		if !strings.Contains(err.Error(), "is the floor of registry "+chainB[0].String()) {
			t.Errorf("%s: %v, want it to name the registry the floor is of", name, err)
		}
	}
}

// TestFloorStateDirCannotBeMade: a state directory that cannot be made
// (under a regular file: ENOTDIR; under /proc, whose file system makes
// no directory: ENOENT), or whose floors directory or floor is a file
// of another kind than the one it must be, is refused
// ledger_write_failed saying what is wrong with the path, with the
// remedy set_state_dir. They said only the file system's error ("mkdir
// /proc/x: no such file or directory"), with no remedy, where a denied,
// read-only or full one had it. Whoever the user: root too.
func TestFloorStateDirCannotBeMade(t *testing.T) {
	ctx := context.Background()
	d := acceptedRegistry(t, t.TempDir())
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	verifyIn := func(state string) error {
		t.Helper()
		_, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
		wantRefusal(t, err, refusal.LedgerWriteFailed)
		return err
	}
	wantWords := func(err error, words ...string) {
		t.Helper()
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v\nwant it to say %q", err, w)
			}
		}
	}
	t.Run("under a file", func(t *testing.T) {
		state := filepath.Join(file, "state")
		err := verifyIn(state)
		wantFloorRemedy(t, err, file)
		wantWords(err, "the verifier's state directory "+state+" cannot be made: "+file+", on its path, is a file, not a directory: give the verifier a state directory that is a directory, or can be made")
	})
	t.Run("under /proc", func(t *testing.T) {
		if _, err := os.Stat("/proc/self/status"); err != nil {
			t.Skip("no /proc here")
		}
		state := "/proc/cruxprov-no-such-state"
		err := verifyIn(state)
		wantFloorRemedy(t, err, state)
		wantWords(err, "cannot make the verifier floors directory "+state+"/floors: mkdir "+state+": no such file or directory; the verifier's state directory "+state+" is on procfs, a file system of the kernel's")
	})
	t.Run("floors a FIFO", func(t *testing.T) {
		state := filepath.Join(base, "fifo-state")
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		floors := filepath.Join(state, "floors")
		if err := unix.Mkfifo(floors, 0o600); err != nil {
			t.Fatal(err)
		}
		err := verifyIn(state)
		wantFloorRemedy(t, err, floors)
		wantWords(err, floors+" is a FIFO (named pipe) where a directory of the verifier's state directory must be: move it away, or give the verifier a state directory it can write")
	})
	t.Run("floor a directory", func(t *testing.T) {
		state := filepath.Join(base, "dir-state")
		if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
			t.Fatal(err)
		}
		floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
		if len(floors) != 1 {
			t.Fatalf("floors %v", floors)
		}
		if err := os.Remove(floors[0]); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(floors[0], 0o755); err != nil {
			t.Fatal(err)
		}
		err := verifyIn(state)
		wantFloorRemedy(t, err, floors[0])
		wantWords(err, "cannot read the verifier floor "+floors[0]+": "+floors[0]+" is a directory, not a regular file; a floor is a regular file: move this away")
	})
}

// TestFloorStateDirOnKernelFS: a state directory on /sys or /proc,
// there or not, is refused ledger_write_failed saying that no one can
// write there and to give the verifier a state directory on another
// file system, with the remedy set_state_dir. Root's mkdir on sysfs is
// refused EPERM, and it was advised "make /sys (its owner: uid 0, mode
// 0555) writable by this user", which root is and no one can make it;
// another user's EACCES was advised the same. procfs refuses ENOENT,
// and /proc/self is there: it too is said as the kernel's.
func TestFloorStateDirOnKernelFS(t *testing.T) {
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no sysfs at /sys here")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no procfs at /proc here")
	}
	ctx := context.Background()
	d := acceptedRegistry(t, t.TempDir())
	for _, c := range []struct{ state, fs, at string }{
		{"/sys/cruxprov-no-such-state", "sysfs", "/sys/cruxprov-no-such-state"},
		{"/sys/kernel/cruxprov-no-such-state", "sysfs", "/sys/kernel/cruxprov-no-such-state"},
		{"/sys/kernel", "sysfs", "/sys/kernel/floors"},
		{"/sys", "sysfs", "/sys/floors"},
		{"/proc/self", "procfs", "/proc/self/floors"},
	} {
		t.Run(c.state, func(t *testing.T) {
			_, err := registry.VerifyPin(ctx, d, c.state, "acme-echo", time.Now())
			wantRefusal(t, err, refusal.LedgerWriteFailed)
			wantFloorRemedy(t, err, c.at)
			want := "the verifier's state directory " + c.state + " is on " + c.fs + ", a file system of the kernel's, where no user (root neither) can make a file or directory, so its floors cannot be kept there: give the verifier a state directory on another file system"
			if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "writable") {
				t.Errorf("%v\nwant it to say %q, and nothing of making it writable", err, want)
			}
		})
	}
}

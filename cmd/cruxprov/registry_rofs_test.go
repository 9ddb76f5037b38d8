package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/registry"
)

// TestRegistryReadOnlyUnfinished: a registry whose change was
// interrupted (its journal written, the change not finished) on a file
// system mounted read-only. Every open of it, the owner's too, was
// refused registry_corrupt, "the registry's owner finishes it by opening
// the registry", with `cruxprov registry repair` to run: which on that
// mount is refused the same, so the advice could not be followed. The
// owner's commands, those that only read (provider show, changeset list,
// registry log --verify) and those that change it (changeset approve),
// are refused registry_write_failed now, as on a full disk: remount it
// read-write, then run the command again, which finishes it; nothing is
// written. Another user's read (an executor's) is still refused, as
// any change left unfinished is (registry_corrupt: what it would read is
// half of a change), saying the owner finishes it once the registry is
// writable again (remount it read-write) and advising no command. Once
// remounted read-write, the owner's read finishes it. As root on a mount
// of its own (and uid 65534 for the other user), and as an unprivileged
// user in a user namespace (TestRegistryReadOnlyUnfinishedRootless).
func TestRegistryReadOnlyUnfinished(t *testing.T) {
	inNS := os.Getenv(usernsEnv) != ""
	if !inNS && os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root: TestRegistryReadOnlyUnfinishedRootless runs this as an unprivileged user in a user namespace")
	}
	src, id, key, env := proposedHome(t)
	env = append(env, "XDG_STATE_HOME="+filepath.Join(t.TempDir(), "state"))
	runAt := func(home string, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	approve := []string{"changeset", "approve", id, "--key", key}

	// The approval, made in a copy: what it wrote is what its journal
	// holds (the history it appends, the files it writes).
	done := filepath.Join(t.TempDir(), "done")
	copyTree(t, src, done)
	if r := runAt(done, approve...); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	journal := func(home string) []byte {
		t.Helper()
		type file struct {
			Path string `json:"path"`
			Data []byte `json:"data"`
		}
		j := struct {
			Format  string `json:"format"`
			LogSize int64  `json:"log_size"`
			Log     []byte `json:"log"`
			Files   []file `json:"files"`
		}{Format: registry.JournalFormat}
		was, now := registryFiles(t, home), registryFiles(t, done)
		if !strings.HasPrefix(now["log.jsonl"], was["log.jsonl"]) || now["log.jsonl"] == was["log.jsonl"] {
			t.Fatal("the approval appended nothing to the history")
		}
		j.LogSize, j.Log = int64(len(was["log.jsonl"])), []byte(strings.TrimPrefix(now["log.jsonl"], was["log.jsonl"]))
		for p, b := range now {
			if p != "log.jsonl" && !strings.HasSuffix(p, "/") && was[p] != b {
				j.Files = append(j.Files, file{filepath.ToSlash(p), []byte(b)})
			}
		}
		if len(j.Files) == 0 {
			t.Fatal("the approval wrote no file")
		}
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A tmpfs another user can reach (as root), the change interrupted
	// there, then mounted read-only.
	base := t.TempDir()
	if !inNS {
		asuser.Require(t, "run as uid 65534")
		base = asuser.Dir(t, "cruxprov-rofs-")
	}
	mnt := filepath.Join(base, "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): this test needs root (CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	home := filepath.Join(mnt, "home")
	copyTree(t, src, home)
	reg := filepath.Join(home, "registry")
	jpath := filepath.Join(reg, "journal.json")
	if err := os.WriteFile(jpath, journal(home), 0o644); err != nil {
		t.Fatal(err)
	}
	before := registryFiles(t, home)
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}

	// The owner's commands: registry_write_failed, saying to remount it.
	want := "refused: registry_write_failed: cannot finish the registry change recorded in " + jpath + ", which was interrupted (until it is finished the registry is not read): "
	fix := "the file system of " + reg + " is mounted read-only: remount it read-write, then run the command again, which finishes it (the change is kept)"
	for _, args := range [][]string{
		{"provider", "show", "acme-echo"}, {"changeset", "list"}, {"registry", "log", "--verify"}, // reads
		approve, {"changeset", "reject", id, "--reason", "not now"}, // changes
	} {
		r := runAt(home, args...)
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, fix) ||
			strings.Contains(r.stderr, "to fix:") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v by the owner, a change interrupted on a read-only file system: %+v\nwant %q … %q, one line, no command to run", args, r, want, fix)
		}
	}

	// Another user's read (an executor's): refused, saying who finishes
	// it, and when.
	if !inNS {
		dir := asuser.Dir(t, "cruxprov-rofs-user-")
		exe := asuser.Copy(t, dir, bin)
		for _, args := range [][]string{{"provider", "show", "acme-echo"}, {"changeset", "list"}} {
			cmd := asuser.Command(65534, 65534, exe, append([]string{"--home", home}, args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "XDG_STATE_HOME=" + asuser.TempDir(t, dir, 65534, 65534)}
			r := runCmd(t, cmd)
			want := "refused: registry_corrupt: a registry change was interrupted and is not finished (" + jpath + "), and it cannot be finished while the file system of " + reg + " is mounted read-only"
			fix := "once the registry is writable again (remount it read-write), its owner finishes it by opening it"
			if r.code != exitRefused || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, fix) ||
				strings.Contains(r.stderr, "to fix:") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v by uid 65534, a change interrupted on a read-only file system: %+v\nwant %q … %q, one line, no command to run", args, r, want, fix)
			}
		}
	}
	if after := registryFiles(t, home); !maps.Equal(before, after) {
		t.Errorf("the registry changed on a read-only file system")
	}

	// Remounted read-write, the owner's read finishes it: the registry
	// is the approval's, whole.
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT, ""); err != nil {
		t.Fatal(err)
	}
	if r := runAt(home, "provider", "show", "acme-echo"); r.code != 0 {
		t.Fatalf("provider show, remounted read-write: %+v", r)
	}
	if _, err := os.Stat(jpath); !os.IsNotExist(err) {
		t.Fatalf("the change is not finished: %v", err)
	}
	now, want2 := registryFiles(t, home), registryFiles(t, done)
	if !maps.Equal(now, want2) {
		t.Errorf("finished, the registry is not the approval's")
	}
	if r := runAt(home, approve...); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "approved already") {
		t.Errorf("approve again once finished: %+v", r)
	}
	if r := runAt(home, "registry", "log", "--verify"); r.code != 0 {
		t.Errorf("the history once finished: %+v", r)
	}
}

// TestRegistryReadOnlyUnfinishedRootless is TestRegistryReadOnlyUnfinished
// as an unprivileged user, in a user namespace of its own where it mounts
// its tmpfs (skipped where the machine allows none).
func TestRegistryReadOnlyUnfinishedRootless(t *testing.T) {
	if os.Getenv(usernsEnv) != "" {
		t.Skip("the child runs TestRegistryReadOnlyUnfinished")
	}
	inUserNS(t, "TestRegistryReadOnlyUnfinished")
}

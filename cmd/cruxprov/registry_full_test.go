package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// usernsEnv marks a child of this test binary run inside a user and
// mount namespace of its own (unshare -Urm) by an unprivileged user,
// where it may mount the tmpfs it fills; cliEnv hands a child the
// cruxprov binary to run (TestMain builds none there).
const (
	usernsEnv = "CRUXPROV_TEST_IN_USERNS"
	cliEnv    = "CRUXPROV_TEST_CLI"
)

// inUserNS runs test (a test of this binary) again as an unprivileged
// user inside a user and mount namespace of its own (unshare -Urm), where
// it may mount a tmpfs: as uid 65534 when this process is root (CI), as
// this user otherwise. It skips, saying why, where unshare is missing or
// user namespaces are not allowed, and fails t unless the child passed.
func inUserNS(t *testing.T, test string) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed: no way to mount a tmpfs as an unprivileged user")
	}
	var cmd, probe *exec.Cmd
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as uid 65534")
		dir := asuser.Dir(t, "cruxprov-userns-")
		exe, cli := asuser.CopySelf(t, dir), asuser.Copy(t, dir, bin)
		probe = asuser.Command(65534, 65534, unshare, "-Urm", "true")
		cmd = asuser.Command(65534, 65534, unshare, "-Urm", exe, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + asuser.TempDir(t, dir, 65534, 65534), usernsEnv + "=1", cliEnv + "=" + cli}
	} else {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		probe = exec.Command(unshare, "-Urm", "true")
		cmd = exec.Command(unshare, "-Urm", exe, "-test.run=^"+test+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), usernsEnv+"=1", cliEnv+"="+bin)
	}
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("this machine does not let an unprivileged user make a user namespace (unshare -Urm: %v: %s): the rootless half of this test cannot mount its tmpfs", err, strings.TrimSpace(string(out)))
	}
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "--- SKIP: "+test) {
		t.Skipf("in the user namespace:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("as an unprivileged user in a user namespace: %v\n%s", err, out)
	}
}

// copyTree copies the directory src (directories and regular files, with
// their modes) into dst, which it makes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if e.IsDir() {
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	// Directory modes last: a read-only one took no files.
	filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			info, _ := e.Info()
			rel, _ := filepath.Rel(src, p)
			os.Chmod(filepath.Join(dst, rel), info.Mode().Perm())
		}
		return nil
	})
}

// fillLeaving fills the file system of mnt (a tmpfs) with a file, then
// gives back pages pages of it, and returns what frees the rest.
func fillLeaving(t *testing.T, mnt string, pages int) (free func()) {
	t.Helper()
	f, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for chunk := make([]byte, 4096); ; {
		m, err := f.Write(chunk)
		n += int64(m)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := f.Truncate(max(0, n-int64(pages)*4096)); err != nil {
		t.Fatal(err)
	}
	return func() { os.Remove(f.Name()) }
}

// registryFiles is every file under the registry of home (its lock
// left out) with its bytes, and every directory: what a command that
// changed nothing leaves as it was.
func registryFiles(t *testing.T, home string) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join(home, "registry")
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case e.IsDir():
			out[rel+"/"] = ""
		case rel != ".lock":
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// registryTemps is the temp files of atomic writes left in home's
// registry.
func registryTemps(home string) []string {
	var out []string
	filepath.WalkDir(filepath.Join(home, "registry"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestRegistryFullDisk runs each command that changes the registry
// (key trust as the root of trust and as a proposal, policy set, key
// untrust, interface register, changeset approve and reject, provider
// retire, registry repair) on a real tmpfs filled so that the disk runs
// out at each point of its write in turn: none at all, then one page
// more each time, until the command goes through. Each failure is
// refused registry_write_failed (exit 78: it was a plain failure, exit 1,
// "error: registry: cannot record the change …", with no code and no
// word of what to do), one line naming the registry and saying to free
// space there, and leaves nothing partial: either nothing changed (the
// registry's files byte for byte as they were), or the change is
// recorded (its journal) and a reader refuses until it is finished; no
// temp file either way. With room again the history verifies and the
// same command goes through. The file system made read-only is refused
// registry_write_failed too, saying to remount it read-write (it was
// registry_corrupt, "not damage"), nothing changed, and the commands
// that only read the registry read it there. As root
// on a mount of its own, and as an unprivileged user in a user namespace
// (TestRegistryFullDiskRootless).
func TestRegistryFullDisk(t *testing.T) {
	if os.Getenv(usernsEnv) == "" && os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root: TestRegistryFullDiskRootless runs this as an unprivileged user in a user namespace")
	}
	keys := t.TempDir()
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
	runAt := func(home string, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(env, "XDG_STATE_HOME="+filepath.Join(keys, "state"))
		return runCmd(t, cmd)
	}
	must := func(home string, args ...string) result {
		t.Helper()
		r := runAt(home, args...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	for _, k := range []string{"a", "b"} {
		must(keys, "key", "generate", "--out", filepath.Join(keys, k))
	}
	a, b := filepath.Join(keys, "a"), filepath.Join(keys, "b")
	schema := filepath.Join(keys, "schema.json")
	os.WriteFile(schema, []byte(`{"type":"object","properties":{"text":{"type":"string"}}}`), 0o644)

	// Templates, made once with room: copied into each tmpfs.
	templates := t.TempDir()
	template := func(name string, make func(home string) []string) (string, []string) {
		home := filepath.Join(templates, name)
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		return home, make(home)
	}
	rooted := func(home string) { must(home, "key", "trust", a+".pub", "--name", "a") }
	twoApprovers := func(home string) {
		rooted(home)
		id := strings.TrimSpace(must(home, "--quiet", "key", "trust", b+".pub", "--name", "b").stdout)
		must(home, "changeset", "approve", id, "--key", a+".key")
	}
	accepted := func(home string) {
		rooted(home)
		must(home, "changeset", "approve", proposeEcho(t, home), "--key", a+".key")
	}
	type tcase struct {
		name string
		home string
		args []string
	}
	var cases []tcase
	add := func(name string, make func(home string) []string) {
		home, args := template(strings.ReplaceAll(name, " ", "-"), make)
		cases = append(cases, tcase{name, home, args})
	}
	add("key trust root", func(string) []string { return []string{"key", "trust", a + ".pub", "--name", "a"} })
	add("key trust proposal", func(home string) []string {
		rooted(home)
		return []string{"key", "trust", b + ".pub", "--name", "b"}
	})
	add("policy set", func(home string) []string {
		twoApprovers(home)
		return []string{"policy", "set", "--threshold", "2"}
	})
	add("key untrust", func(home string) []string {
		twoApprovers(home)
		return []string{"key", "untrust", "b"}
	})
	add("interface register", func(home string) []string {
		rooted(home)
		return []string{"interface", "register", "acme.echo", "--schema", schema}
	})
	add("changeset approve", func(home string) []string {
		rooted(home)
		return []string{"changeset", "approve", proposeEcho(t, home), "--key", a + ".key"}
	})
	add("changeset reject", func(home string) []string {
		rooted(home)
		return []string{"changeset", "reject", proposeEcho(t, home), "--reason", "egress to an unknown host"}
	})
	add("provider retire", func(home string) []string {
		accepted(home)
		return []string{"provider", "retire", "acme-echo"}
	})
	add("registry repair", func(home string) []string {
		accepted(home)
		if err := os.Remove(filepath.Join(home, "registry", "pins", "acme-echo.json")); err != nil {
			t.Fatal(err)
		}
		return []string{"registry", "repair"}
	})

	recordedSeen := false
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			for pages := 0; ; pages++ {
				if pages > 32 {
					t.Fatalf("still refused with %d pages free", pages)
				}
				mnt := smallTmpfs(t, "size=512k,mode=0755")
				home := filepath.Join(mnt, "home")
				copyTree(t, c.home, home)
				before := registryFiles(t, home)
				free := fillLeaving(t, mnt, pages)
				r := runAt(home, c.args...)
				if r.code == 0 {
					free()
					if pages == 0 {
						t.Fatalf("went through on a full disk: %+v", r)
					}
					if v := runAt(home, "registry", "log", "--verify"); v.code != 0 {
						t.Fatalf("the history after it: %+v", v)
					}
					return
				}
				line := strings.TrimSuffix(r.stderr, "\n")
				reg := filepath.Join(home, "registry")
				if r.code != exitRefused || strings.Contains(line, "\n") || !strings.HasPrefix(line, "refused: registry_write_failed: ") ||
					!strings.Contains(line, "no space left on device") || !strings.Contains(line, "free space (or inodes: df -i) on the file system of "+reg) || r.stdout != "" {
					t.Fatalf("%d pages free: want one line, refused registry_write_failed, saying to free space on %s: %+v", pages, reg, r)
				}
				if tmp := registryTemps(home); len(tmp) > 0 {
					t.Fatalf("%d pages free: temp files left: %v", pages, tmp)
				}
				_, jerr := os.Stat(filepath.Join(reg, "journal.json"))
				switch {
				case strings.Contains(line, "so nothing was changed"):
					if jerr == nil {
						t.Fatalf("%d pages free: said nothing was changed, and left its journal", pages)
					}
					after := registryFiles(t, home)
					for p, v := range before {
						if after[p] != v {
							t.Errorf("%d pages free: said nothing was changed, and changed %s", pages, p)
						}
					}
					for p := range after {
						if _, ok := before[p]; !ok && !strings.HasSuffix(p, "/") {
							t.Errorf("%d pages free: said nothing was changed, and wrote %s", pages, p)
						}
					}
				case strings.Contains(line, "is recorded in the registry") && strings.Contains(line, "which finishes it"):
					recordedSeen = true
					if jerr != nil {
						t.Fatalf("%d pages free: said the change is recorded, and left no journal: %v", pages, jerr)
					}
					// Half of a change is never read as the registry:
					// the owner's read finishes it, or is refused.
					if v := runAt(home, "key", "list"); v.code != exitRefused || !strings.Contains(v.stderr, "registry_write_failed") {
						t.Fatalf("%d pages free: a read of the registry with the change half written and the disk full: %+v", pages, v)
					}
				default:
					t.Fatalf("%d pages free: says neither that nothing was changed nor that the change is recorded: %q", pages, line)
				}
				free()
				if v := runAt(home, c.args...); v.code != 0 {
					t.Fatalf("%d pages free, then room: the same command again: %+v", pages, v)
				}
				if v := runAt(home, "registry", "log", "--verify"); v.code != 0 {
					t.Fatalf("%d pages free, then room: the history: %+v", pages, v)
				}
				if _, err := os.Stat(filepath.Join(reg, "journal.json")); err == nil {
					t.Fatalf("%d pages free, then room: the change is still not finished", pages)
				}
				if pages == 0 {
					// --json: the refusal is the one document on stdout.
					mnt := smallTmpfs(t, "size=512k,mode=0755")
					home := filepath.Join(mnt, "home")
					copyTree(t, c.home, home)
					defer fillLeaving(t, mnt, 0)()
					r := runAt(home, append(c.args, "--json")...)
					var doc struct {
						Refused struct{ Code, Detail string }
					}
					if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "registry_write_failed" || !strings.Contains(doc.Refused.Detail, "free space") {
						t.Fatalf("--json on a full disk: %+v", r)
					}
				}
			}
		})
	}
	if !recordedSeen && !t.Failed() {
		t.Error("no command failed past its commit point (journal written, a file not): the recorded case was not exercised")
	}

	// Mounted read-only: no write is tried; it says so, with what to do
	// (registry_write_failed: it was registry_corrupt, "which is not
	// damage to the registry", under a code whose advice is to restore
	// the registry from a copy), and nothing changed. What only reads
	// the registry reads it.
	t.Run("read-only", func(t *testing.T) {
		for _, c := range []tcase{cases[5], cases[7]} { // changeset approve; provider retire, a pin accepted
			mnt := smallTmpfs(t, "size=512k,mode=0755")
			home := filepath.Join(mnt, "home")
			copyTree(t, c.home, home)
			before := registryFiles(t, home)
			if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				t.Fatal(err)
			}
			r := runAt(home, c.args...)
			want := "cannot record the change in the registry " + filepath.Join(home, "registry") + ", so nothing was changed: "
			fix := "the file system of " + filepath.Join(home, "registry") + " is mounted read-only: remount it read-write, or use a copy of the registry, and run the command again"
			if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: registry_write_failed: "+want) || !strings.Contains(r.stderr, fix) ||
				strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%s on a read-only file system: %+v\nwant registry_write_failed, %q, %q", c.name, r, want, fix)
			}
			if after := registryFiles(t, home); len(after) != len(before) {
				t.Errorf("%s: changed on a read-only file system: %v", c.name, after)
			}
			reads := [][]string{{"changeset", "list"}, {"key", "list"}, {"registry", "log", "--verify"}}
			if c.name == "provider retire" {
				reads = append(reads, []string{"provider", "show", "acme-echo"}, []string{"provider", "list"})
			}
			for _, args := range reads {
				if r := runAt(home, args...); r.code != 0 {
					t.Errorf("%v on a read-only file system: %+v", args, r)
				}
			}
		}
	})
}

// TestRegistryFullDiskRootless is TestRegistryFullDisk as an unprivileged
// user, in a user namespace of its own where it mounts its tmpfs (skipped
// where the machine allows none).
func TestRegistryFullDiskRootless(t *testing.T) {
	if os.Getenv(usernsEnv) != "" {
		t.Skip("the child runs TestRegistryFullDisk")
	}
	inUserNS(t, "TestRegistryFullDisk")
}

// TestRegistryReadOnlyDirOfItsOwner: an operator's own registry with a
// directory or its history made read-only (chmod a-w) is refused before
// anything is written, saying to give it its write permission back
// (chmod u+w PATH), registry_write_failed "so nothing was changed" (it
// was registry_corrupt "not damage", under a code whose advice is to
// restore the registry from a copy; a history made read-only passed the
// directories' check and stopped the change at its append). A reject with
// changesets/ read-only wrote its journal, then failed at the change-set:
// the change recorded and half written, every reader refusing the
// registry until the owner made it writable again and ran a command; and
// the refusal told the owner to run the command as the store's owner.
// Run as uid 65534 (root ignores modes): under setpriv when the test is
// root, as itself otherwise.
func TestRegistryReadOnlyDirOfItsOwner(t *testing.T) {
	exe, base := bin, testdir.New(t)
	runAs := func(args ...string) result {
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as uid 65534")
		base = asuser.Dir(t, "cruxprov-regro-")
		exe = asuser.Copy(t, base, bin)
		runAs = func(args ...string) result {
			cmd := asuser.Command(65534, 65534, exe, args...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base, "CRUXPROV_KEY_PASSWORD=pw"}
			return runCmd(t, cmd)
		}
	}
	t.Cleanup(func() { testdir.Writable(base) })
	home, keys := filepath.Join(base, "home"), filepath.Join(base, "keys")
	for _, d := range []string{home, keys} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			os.Chown(d, 65534, 65534)
		}
	}
	for _, args := range [][]string{
		{"--home", home, "key", "generate", "--out", filepath.Join(keys, "a")},
		{"--home", home, "key", "generate", "--out", filepath.Join(keys, "b")},
		{"--home", home, "key", "trust", filepath.Join(keys, "a.pub"), "--name", "a"},
	} {
		if r := runAs(args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	schema := filepath.Join(keys, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(home, "registry")
	r := runAs("--home", home, "--quiet", "key", "trust", filepath.Join(keys, "b.pub"), "--name", "b")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("propose b: %+v", r)
	}
	for _, c := range []struct {
		dir  string
		args []string
	}{
		{reg, []string{"interface", "register", "acme.echo", "--schema", schema}},
		{filepath.Join(reg, "changesets"), []string{"changeset", "reject", id, "--reason", "not now"}},
		{filepath.Join(reg, "changesets"), []string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key")}},
		{filepath.Join(reg, "pins"), []string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key")}},
		{filepath.Join(reg, "log.jsonl"), []string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key")}},
		{filepath.Join(reg, "log.jsonl"), []string{"changeset", "reject", id, "--reason", "not now"}},
	} {
		t.Run(filepath.Base(c.dir)+"/"+c.args[1], func(t *testing.T) {
			before := registryFiles(t, home)
			mode, back := os.FileMode(0o555), os.FileMode(0o755)
			if filepath.Base(c.dir) == "log.jsonl" {
				mode, back = 0o444, 0o644
			}
			if err := os.Chmod(c.dir, mode); err != nil {
				t.Fatal(err)
			}
			r := runAs(append([]string{"--home", home}, c.args...)...)
			os.Chmod(c.dir, back)
			want := "without write permission on " + c.dir + ": give it back (chmod u+w " + c.dir + ") and run the command again"
			if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: registry_write_failed: cannot record the change in the registry "+reg+", so nothing was changed: ") ||
				!strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%v with %s read-only: want refused, %q: %+v", c.args, c.dir, want, r)
			}
			after := registryFiles(t, home)
			if len(after) != len(before) {
				t.Fatalf("%v with %s read-only: the registry changed: %v", c.args, c.dir, after)
			}
			for p, v := range before {
				if after[p] != v {
					t.Fatalf("%v with %s read-only: %s changed", c.args, c.dir, p)
				}
			}
		})
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// acceptedStore is a store under base whose registry has acme-echo
// accepted (no env: a verify past the floor is refused for it, never
// ledger_write_failed), and an input file for a run.
func acceptedStore(t *testing.T, base string) (home, input string) {
	t.Helper()
	ctx := context.Background()
	home = filepath.Join(base, "store")
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	registrytest.Accept(t, d, registrytest.Change("acme-echo", "1.0"), root)
	input = filepath.Join(base, "in.json")
	if err := os.WriteFile(input, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, input
}

// TestStateDirCannotBeMadeAdvisesStateDir: verify and run given a state
// directory that cannot be made (under /proc, whose file system makes no
// directory: ENOENT; under a regular file: ENOTDIR) were refused
// ledger_write_failed with the file system's error alone ("mkdir
// /proc/x: no such file or directory"), and no remedy, where a denied,
// read-only or full one carried set_state_dir. Each now says what is
// wrong with the path and advises the command again with --state-dir
// DIR (in --json too), which, run as printed, gets past the floor.
func TestStateDirCannotBeMadeAdvisesStateDir(t *testing.T) {
	base := t.TempDir()
	home, input := acceptedStore(t, base)
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type dirCase struct {
		name, state string
		says        []string // any one of them: run as root and as another user fails at different steps
	}
	cases := []dirCase{{"under a file", filepath.Join(file, "state"), []string{file + ", on its path, is a file, not a directory", file + " on its path being a file, not a directory"}}}
	if _, err := os.Stat("/proc/self/status"); err == nil {
		// procfs, a file system of the kernel's: said so to root and to
		// another user alike (TestKernelFSStateDirAdvisesStateDir).
		cases = append(cases, dirCase{"under /proc", "/proc/cruxprov-no-state", []string{"the verifier's state directory /proc/cruxprov-no-state is on procfs, a file system of the kernel's", "/proc is on procfs, a file system of the kernel's"}})
	}
	for _, c := range cases {
		for _, cmdArgs := range [][]string{{"verify", "acme-echo"}, {"run", "acme-echo", "echo", "--input", input}} {
			t.Run(c.name+"/"+cmdArgs[0], func(t *testing.T) {
				args := append(append([]string{"--home", home}, cmdArgs...), "--state-dir", c.state)
				cmd := exec.Command(bin, args...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
				r := runCmd(t, cmd)
				fix := "; to fix: cruxprov --home " + home + " " + strings.Join(cmdArgs, " ") + " --state-dir DIR"
				said := false
				for _, s := range c.says {
					said = said || strings.Contains(r.stderr, s)
				}
				if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: ") || !said || !strings.HasSuffix(strings.TrimSpace(r.stderr), fix) {
					t.Fatalf("%v: %+v\nwant ledger_write_failed saying one of %q, ending %q", args, r, c.says, fix)
				}
				cmd = exec.Command(bin, append(args, "--json")...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
				j := runCmd(t, cmd)
				var doc struct {
					Refused struct {
						Code   string `json:"code"`
						Remedy struct {
							Action  string `json:"action"`
							Command string `json:"command"`
						} `json:"remedy"`
					} `json:"refused"`
				}
				if err := json.Unmarshal([]byte(j.stdout), &doc); err != nil || doc.Refused.Remedy.Action != string(refusal.ActionSetStateDir) ||
					!strings.HasSuffix(doc.Refused.Remedy.Command, " --state-dir DIR") {
					t.Errorf("--json: %v: %+v", err, j)
				}
				// The fix as printed (DIR, a directory it makes, under the
				// directory it runs in): past the floor and the ledger, to
				// the env this store has none of.
				f := runFix(t, r, t.TempDir())
				if f.code != exitRefused || strings.Contains(f.stderr, "ledger_write_failed") || !strings.Contains(f.stderr, "refused: pin_mismatch: ") {
					t.Errorf("the fix: %+v", f)
				}
			})
		}
	}
	// receipts list reads the ledger there: the same words, where it
	// advised moving the file away (mv of a file above the state
	// directory, /etc/hostname say).
	state := filepath.Join(file, "state")
	cmd := exec.Command(bin, "receipts", "list", "--state-dir", state)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
	r := runCmd(t, cmd)
	want := "its state directory " + state + " cannot be made, " + file + " on its path being a file, not a directory: give --state-dir a directory, or one that can be made"
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: ") || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "mv ") ||
		!strings.HasSuffix(strings.TrimSpace(r.stderr), "; to fix: cruxprov receipts list --state-dir DIR") {
		t.Errorf("receipts list --state-dir under a file: %+v\nwant %q", r, want)
	}
}

// TestFloorUnreadableSaysRead: a verifier floor this user may not read
// (its mode 0600 and root's, as a `sudo cruxprov verify` with this
// user's state directory leaves it; mode 0 for a test run as another
// user than root) was refused saying "make … writable by this user", of
// a read. It is refused ledger_write_failed, the code of the state
// directory (whether its read or its write is refused first depends on
// the modes), naming the file, its owner and mode, with the remedy
// --state-dir DIR; never taken for a floor not there (no verify passes
// it). Root reads whatever the modes: as root the test verifies as uid
// 65534 (asuser), the state directory its own and the floor root's.
func TestFloorUnreadableSaysRead(t *testing.T) {
	base, verifier := modesReader(t, "cruxprov-floor-unreadable-")
	home, _ := acceptedStore(t, base)
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(state, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--home", home, "verify", "acme-echo", "--state-dir", state}
	if r := verifier(args...); r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_mismatch: ") {
		t.Fatalf("verify past the floor: %+v", r)
	}
	floors, _ := filepath.Glob(filepath.Join(state, "floors", "*.json"))
	if len(floors) != 1 {
		t.Fatalf("floors %v", floors)
	}
	p := floors[0]
	owner, mode := os.Geteuid(), os.FileMode(0)
	if owner == 0 {
		mode = 0o600
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	uid := os.Geteuid()
	if uid == 0 {
		uid = 65534
	}
	r := verifier(args...)
	want := fmt.Sprintf("refused: ledger_write_failed: cannot read the verifier floor %s: open %s: permission denied; this user (uid %d) may not read %s (its owner: uid %d, mode %04o)", p, p, uid, p, owner, mode)
	fix := "; to fix: cruxprov --home " + home + " verify acme-echo --state-dir DIR"
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, want) || strings.Contains(r.stderr, "writable") || !strings.HasSuffix(strings.TrimSpace(r.stderr), fix) {
		t.Fatalf("verify with its floor unreadable: %+v\nwant %q … %q", r, want, fix)
	}
}

// TestKernelFSStateDirAdvisesStateDir: a state directory or ledger on
// /sys or /proc, file systems of the kernel's where no user (root
// neither) can make a file, is refused ledger_write_failed saying so,
// the state directory with the remedy --state-dir DIR (in --json too),
// which run as printed gets past the floor and the ledger; and as root
// (EPERM, and access(2) granting W_OK there) as another user (EACCES)
// the same. They were advised "make /sys (its owner: uid 0, mode 0555)
// writable by this user", "make the directory /sys writable by this
// user", or, of /proc/self, to lift an immutable attribute; a ledger
// named there with --ledger got as far as the run's intent as root, and
// receipts scan as root took /sys for a state directory with 0 B free.
func TestKernelFSStateDirAdvisesStateDir(t *testing.T) {
	if _, err := os.Stat("/sys/kernel"); err != nil {
		t.Skip("no sysfs at /sys here")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no procfs at /proc here")
	}
	base := t.TempDir()
	home, input := acceptedStore(t, base)
	says := func(t *testing.T, r result) {
		t.Helper()
		if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: ") || !strings.Contains(r.stderr, ", a file system of the kernel's, where no user (root neither) can make a file or directory") ||
			strings.Contains(r.stderr, "writable") || strings.Contains(r.stderr, "immutable") {
			t.Fatalf("%+v\nwant ledger_write_failed saying the file system is the kernel's, and nothing of making it writable", r)
		}
	}
	for _, state := range []string{"/sys/cruxprov-no-state", "/sys/kernel", "/proc/self", "/proc/cruxprov-no-state"} {
		cmds := [][]string{{"verify", "acme-echo"}, {"run", "acme-echo", "echo", "--input", input}}
		if _, err := os.Stat(state); err == nil {
			// A --state-dir not there is a usage error to receipts,
			// which reads it ("no state directory at …").
			cmds = append(cmds, []string{"receipts", "scan"})
		}
		for _, cmdArgs := range cmds {
			t.Run(state+"/"+cmdArgs[0], func(t *testing.T) {
				args := append(append([]string{"--home", home}, cmdArgs...), "--state-dir", state)
				cmd := exec.Command(bin, args...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
				r := runCmd(t, cmd)
				says(t, r)
				if fix := "; to fix: cruxprov --home " + home + " " + strings.Join(cmdArgs, " ") + " --state-dir DIR"; !strings.HasSuffix(strings.TrimSpace(r.stderr), fix) {
					t.Fatalf("%+v\nwant it to end %q", r, fix)
				}
				cmd = exec.Command(bin, append(args, "--json")...)
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
				j := runCmd(t, cmd)
				var doc struct {
					Refused struct {
						Remedy struct {
							Action  string `json:"action"`
							Command string `json:"command"`
						} `json:"remedy"`
					} `json:"refused"`
				}
				if err := json.Unmarshal([]byte(j.stdout), &doc); err != nil || doc.Refused.Remedy.Action != string(refusal.ActionSetStateDir) ||
					!strings.HasSuffix(doc.Refused.Remedy.Command, " --state-dir DIR") {
					t.Errorf("--json: %v: %+v", err, j)
				}
				dir := t.TempDir()
				if cmdArgs[0] == "receipts" {
					// A state directory that is there: its scan is a
					// health check of its ledger, which no run made yet.
					if err := os.Mkdir(filepath.Join(dir, "DIR"), 0o700); err != nil {
						t.Fatal(err)
					}
					if f := runFix(t, r, dir); f.code != 0 {
						t.Errorf("the fix: %+v", f)
					}
					return
				}
				if f := runFix(t, r, dir); f.code != exitRefused || strings.Contains(f.stderr, "ledger_write_failed") || !strings.Contains(f.stderr, "refused: pin_mismatch: ") {
					t.Errorf("the fix: %+v", f)
				}
			})
		}
	}
	// The default state directory ($XDG_STATE_HOME/cruxprov) there: the
	// same, with the remedy --state-dir DIR.
	t.Run("XDG_STATE_HOME", func(t *testing.T) {
		cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "echo", "--input", input)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base, "XDG_STATE_HOME=/sys/kernel"}
		r := runCmd(t, cmd)
		says(t, r)
		if !strings.HasSuffix(strings.TrimSpace(r.stderr), " --state-dir DIR") {
			t.Errorf("%+v\nwant the remedy --state-dir DIR", r)
		}
	})
	// A ledger named there: refused before anything is verified, saying
	// to keep it on another file system; the state directory is fine,
	// so no --state-dir is advised.
	for _, ledger := range []string{"/sys/cruxprov-l.jsonl", "/sys/kernel/l.jsonl", "/proc/self/l.jsonl"} {
		t.Run("--ledger "+ledger, func(t *testing.T) {
			cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "echo", "--input", input, "--state-dir", filepath.Join(base, "state"), "--ledger", ledger)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
			r := runCmd(t, cmd)
			says(t, r)
			if !strings.HasSuffix(strings.TrimSpace(r.stderr), "; keep the ledger on another file system") {
				t.Errorf("%+v\nwant it to end: keep the ledger on another file system", r)
			}
		})
	}
	// receipts scan of a file there named as a ledger (an archive, for
	// all it knows): it is read, and the warning says no run can write
	// it, where it said "not writable by this user" and "0 B free: free
	// space on it".
	t.Run("receipts scan --ledger /proc/self/status", func(t *testing.T) {
		cmd := exec.Command(bin, "receipts", "scan", "--ledger", "/proc/self/status")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
		r := runCmd(t, cmd)
		if r.code != 0 || !strings.Contains(r.stderr, "warning: receipts ledger /proc/self/status is not writable: a run given --ledger /proc/self/status is refused ledger_write_failed (") ||
			!strings.Contains(r.stderr, ", a file system of the kernel's, where no user (root neither) can make a file or directory; keep the ledger on another file system)") ||
			strings.Contains(r.stderr, "free") || strings.Contains(r.stderr, "by this user") {
			t.Errorf("%+v\nwant exit 0, warning that no run can write it there, and nothing of its room", r)
		}
	})
}

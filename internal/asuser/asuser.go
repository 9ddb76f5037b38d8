// Package asuser runs a test's own binary as another user: the one helper
// for the tests that must not be root (root ignores file modes) or must
// be a particular user (rootless podman), which re-execute the test
// binary under setpriv with a child environment variable.
//
// It owns the steps those tests shared: skipping unless the test runs as
// root with setpriv on PATH, a world-readable temporary directory, a copy
// of the running test binary there (the go test cache's copy is not
// readable by other users) or of a program the test built, the setpriv
// command line, and finding a user with subordinate ids for rootless
// podman (Subid). What the child
// does, its environment and what the parent asserts stay with each test.
// Only tests import it.
package asuser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Require skips t unless it runs as root with setpriv (util-linux) on
// PATH. purpose completes "needs root to …" and "no way to …", e.g.
// "run as uid 65534".
func Require(t testing.TB, purpose string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to " + purpose)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is not installed (util-linux): no way to " + purpose)
	}
}

// Dir returns a new directory under the system temporary directory, named
// prefix and a random suffix, mode 0755 so another user can enter it; it
// is removed when the test and its subtests finish.
func Dir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CopySelf copies the running test binary into dir (a directory from Dir)
// under its own name ("<package>.test"), mode 0755, and returns its path.
func CopySelf(t testing.TB, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Copy(t, dir, exe)
}

// Copy copies the program src (one a test built, say, in a directory
// only root can enter) into dir under its own name, mode 0755, and
// returns its path.
func Copy(t testing.TB, dir, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Command returns bin with args run as uid and gid with no supplementary
// groups: setpriv --reuid=uid --regid=gid --clear-groups -- bin args….
// The caller sets its Env (the child inherits root's otherwise), Dir and
// streams.
func Command(uid, gid int, bin string, args ...string) *exec.Cmd {
	return setpriv("--clear-groups", uid, gid, bin, args)
}

// CommandInitGroups is Command with the supplementary groups of uid's
// user from the group database (--init-groups), for a named user such as
// one rootless podman runs as.
func CommandInitGroups(uid, gid int, bin string, args ...string) *exec.Cmd {
	return setpriv("--init-groups", uid, gid, bin, args)
}

// TempDir returns a new directory in dir (a directory from Dir) owned by
// uid and gid, for a child run as that user to have as its TMPDIR: what
// the child makes there (its tests' t.TempDir) goes with dir, and stays
// in the temporary directory the parent was given. Without one the child
// wrote /tmp whatever the parent's TMPDIR.
func TempDir(t testing.TB, dir string, uid, gid int) string {
	t.Helper()
	tmp, err := os.MkdirTemp(dir, "tmp-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		t.Fatal(err)
	}
	return tmp
}

// RunTest runs the test named test of this test binary (copied into dir,
// a directory from Dir) as uid and gid 65534, in dir, with PATH, TMPDIR
// (TempDir) and env (NAME=value each, which may set either) as its whole
// environment, and fails t unless that test passed: the unprivileged
// half of a test whose parent is root.
func RunTest(t testing.TB, dir, test string, env ...string) {
	t.Helper()
	cmd := Command(65534, 65534, CopySelf(t, dir), "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "TMPDIR=" + TempDir(t, dir, 65534, 65534)}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}

// RunChild runs the test named test (a subtest as "Parent/Sub") of this
// test binary again, in a child process of the same user, with env
// (NAME=value each) added to this process's environment, and fails t
// unless that test passed: for a test that changes what the whole process
// shares (an rlimit, say), which the test framework's own files (go
// test's testlog) must not see.
func RunChild(t testing.TB, test string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := strings.Split(test, "/")
	for i := range run {
		run[i] = "^" + regexp.QuoteMeta(run[i]) + "$"
	}
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok { // the child ends with its parent's time
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test+" ") {
		t.Fatalf("in a child: %v\n%s", err, out)
	}
}

func setpriv(groups string, uid, gid int, bin string, args []string) *exec.Cmd {
	return exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), groups, "--", bin}, args...)...)
}

// LimitFileSize lowers this process's RLIMIT_FSIZE to n bytes, skipping t
// where it cannot, and returns what restores it. A write that crosses it
// is cut short, the next fails EFBIG (Go ignores the SIGXFSZ): a full
// disk's errors without one. Only in a child (RunChild): go test's own
// files must not meet the limit.
func LimitFileSize(t testing.TB, n uint64) (restore func()) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = n
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot lower RLIMIT_FSIZE: %v", err)
	}
	return func() { unix.Setrlimit(unix.RLIMIT_FSIZE, &old) }
}

package shim

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The real binaries, built once by TestMain: cruxshim exactly as `make build`
// builds it, and the child it execs (testdata/child), which reports what a
// harness would see.
var shimBin, childBin string

// seen collects every code a test of the real binary produced; skipped says
// some case could not run here. With both, TestMain checks that every code in
// the closed set was produced by the binary at least once.
var (
	seen    sync.Map
	skipped atomic.Bool
)

func TestMain(m *testing.M) {
	if os.Getenv(pid1Env) != "" {
		pid1Wrapper() // the test binary re-run as a new pid namespace's first process
	}
	dir, err := os.MkdirTemp("", "cruxshim-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shimBin, childBin = filepath.Join(dir, "cruxshim"), filepath.Join(dir, "child")
	for _, b := range [][2]string{{shimBin, "../cmd/cruxshim"}, {childBin, "./testdata/child"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-buildid=", "-o", b[0], b[1])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" && !skipped.Load() {
		for _, c := range codes {
			if _, ok := seen.Load(c); !ok {
				fmt.Fprintf(os.Stderr, "FAIL: no test of the real binary produced shim_refused: %s\n", c)
				code = 1
			}
		}
	}
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// runShim runs the real cruxshim with args, a fixed small environment plus
// env, and extra descriptors from 3 up.
func runShim(t *testing.T, args []string, env []string, extra ...*os.File) result {
	t.Helper()
	cmd := exec.Command(shimBin, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}, env...)
	cmd.ExtraFiles = extra
	return runCmd(t, cmd, nil)
}

// runCmd runs cmd to its end (killed after a minute, so a hang fails the
// test rather than the suite), calling during after it started.
func runCmd(t *testing.T, cmd *exec.Cmd, during func()) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", cmd.Args, err)
	}
	if during != nil {
		during()
	}
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%q: %v (stderr %q)", cmd.Args, err, r.stderr)
	}
	return r
}

// wantRefused asserts the whole refusal contract: exit 78, exactly one stderr
// line, nothing on stdout.
func wantRefused(t *testing.T, r result, code string) {
	t.Helper()
	seen.Store(code, true)
	if r.code != ExitRefused || r.stderr != "shim_refused: "+code+"\n" || r.stdout != "" {
		t.Fatalf("got exit %d, stderr %q, stdout %q; want exit 78, stderr %q, no stdout",
			r.code, r.stderr, r.stdout, "shim_refused: "+code+"\n")
	}
}

// report is what testdata/child prints.
type report struct {
	Argv          []string        `json:"argv"`
	Env           []string        `json:"env"`
	FD3Open       bool            `json:"fd3_open"`
	FD3           string          `json:"fd3"`
	FD3Seals      int             `json:"fd3_seals"`
	FD3WriteError string          `json:"fd3_write_error"`
	FDs           map[int]string  `json:"fds"`
	Exists        map[string]bool `json:"exists"`
	// CHILD_MODE=init only (TestInit):
	Pid     int            `json:"pid"`
	PPid    int            `json:"ppid"`
	InitFDs map[int]string `json:"init_fds"`
	Orphan  string         `json:"orphan"`
	SigIgn  string         `json:"sig_ign"`
}

// wantDelivered asserts a run succeeded and the child saw exactly bundle on a
// sealed fd 3, no other inherited descriptor, nothing of the bundle on argv
// or in its environment, and none of paths.
func wantDelivered(t *testing.T, r result, bundle string, paths ...string) report {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("got exit %d, stderr %q; want a delivery", r.code, r.stderr)
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("child output %q: %v", r.stdout, err)
	}
	if !rep.FD3Open || rep.FD3 != bundle {
		t.Fatalf("child read %d bytes from fd 3 (open %v), want the %d-byte bundle", len(rep.FD3), rep.FD3Open, len(bundle))
	}
	const sealed = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if rep.FD3Seals&sealed != sealed || rep.FD3WriteError == "" {
		t.Errorf("fd 3 seals %#x, write error %q: want sealed against writes", rep.FD3Seals, rep.FD3WriteError)
	}
	if len(rep.FDs) != 4 || !strings.HasPrefix(rep.FDs[3], "/memfd:"+memfdName) {
		t.Errorf("child inherited %v, want only 0, 1, 2 and the memory file on 3", rep.FDs)
	}
	for _, s := range append(rep.Argv, rep.Env...) {
		if len(bundle) > 0 && (strings.Contains(s, bundle) || strings.Contains(s, "sk-test-")) {
			t.Errorf("the bundle reached argv or the environment: %q", s)
		}
	}
	for _, p := range paths {
		if rep.Exists[p] {
			t.Errorf("%s still exists when CMD starts", p)
		}
	}
	return rep
}

// memMount mounts a private instance of fstype (tmpfs or ramfs) on a fresh
// directory, unmounted at cleanup; it skips when mounting is not permitted.
func memMount(t *testing.T, fstype string) string {
	t.Helper()
	dir := t.TempDir()
	data := ""
	if fstype == "tmpfs" {
		data = "size=4m,mode=0700"
	}
	if err := unix.Mount(fstype, dir, fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		skipped.Store(true)
		t.Skipf("cannot mount %s here (%v): path delivery needs a private memory mount, which needs CAP_SYS_ADMIN", fstype, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make %s private: %v", dir, err)
	}
	return dir
}

// diskDir returns a directory that is on neither tmpfs nor ramfs.
func diskDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{t.TempDir(), "."} {
		var fs unix.Statfs_t
		if unix.Statfs(d, &fs) == nil && int64(fs.Type) != unix.TMPFS_MAGIC && int64(fs.Type) != unix.RAMFS_MAGIC {
			if d == "." {
				d = t.TempDir()
				sub, err := os.MkdirTemp(".", ".shimtest-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(sub) })
				return sub
			}
			return d
		}
	}
	skipped.Store(true)
	t.Skip("no directory off tmpfs/ramfs here: the temp dir and the source tree are both memory file systems")
	return ""
}

func writeBundle(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func testBundle(n int) []byte {
	b := []byte(`{"api_key":"sk-test-` + strings.Repeat("x", max(0, n-24)) + `"}`)
	if n > 0 && len(b) != n {
		b = bytes.Repeat([]byte("s"), n)
	}
	return b
}

func TestPathDelivery(t *testing.T) {
	for _, fstype := range []string{"tmpfs", "ramfs"} {
		t.Run(fstype, func(t *testing.T) {
			mnt := memMount(t, fstype)
			for _, size := range []int{40, maxBundle} {
				p := filepath.Join(mnt, "bundle")
				b := testBundle(size)
				writeBundle(t, p, b)
				r := runShim(t, []string{"--secret-path", p, "--", childBin, p}, nil)
				wantDelivered(t, r, string(b), p)
			}
		})
	}
}

func TestPathRefusals(t *testing.T) {
	mnt := memMount(t, "tmpfs")
	bundle := testBundle(40)
	t.Run("too large", func(t *testing.T) {
		p := filepath.Join(mnt, "big")
		writeBundle(t, p, testBundle(maxBundle+1))
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codeTooLarge)
	})
	t.Run("on disk", func(t *testing.T) {
		p := filepath.Join(diskDir(t), "bundle")
		writeBundle(t, p, bundle)
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathNotMemory)
		wantUnchanged(t, p, bundle)
	})
	t.Run("fifo", func(t *testing.T) {
		p := filepath.Join(mnt, "fifo")
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		// No writer ever opens it: the shim must refuse, not wait.
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathNotRegular)
	})
	t.Run("second link", func(t *testing.T) {
		p, q := filepath.Join(mnt, "linked"), filepath.Join(mnt, "linked2")
		writeBundle(t, p, bundle)
		if err := os.Link(p, q); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathLinked)
		wantUnchanged(t, p, bundle)
		wantUnchanged(t, q, bundle)
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || st.Nlink != 2 || st.Mode&0o777 != 0o600 {
			t.Errorf("linked file changed: nlink %d mode %o err %v", st.Nlink, st.Mode&0o777, err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		target, p := filepath.Join(mnt, "target"), filepath.Join(mnt, "symlink")
		writeBundle(t, target, bundle)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathNotRegular)
		wantUnchanged(t, target, bundle)
	})
	t.Run("dangling symlink", func(t *testing.T) {
		p := filepath.Join(mnt, "dangling")
		if err := os.Symlink(filepath.Join(mnt, "nothing"), p); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathNotRegular)
	})
	t.Run("directory", func(t *testing.T) {
		p := filepath.Join(mnt, "dir")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathNotRegular)
	})
	t.Run("device", func(t *testing.T) {
		wantRefused(t, runShim(t, []string{"--secret-path", "/dev/null", childBin}, nil), codePathNotRegular)
	})
	t.Run("missing", func(t *testing.T) {
		p := filepath.Join(mnt, "missing")
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathUnverifiable)
	})
	t.Run("unreadable", func(t *testing.T) {
		// Run as nobody: the root-owned 0600 file cannot be opened, so the
		// shim cannot examine it.
		if _, err := exec.LookPath("setpriv"); err != nil {
			skipped.Store(true)
			t.Skip("setpriv not installed")
		}
		dir := filepath.Join(mnt, "open")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "bundle")
		writeBundle(t, p, bundle)
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", shimBin, "--secret-path", p, childBin)
		wantRefused(t, runCmd(t, cmd, nil), codePathUnverifiable)
	})
	t.Run("unlink fails", func(t *testing.T) {
		// A read-only remount: open, fstat, fstatfs and the link count all
		// pass, and unlink(2) fails with EROFS.
		ro := memMount(t, "tmpfs")
		p := filepath.Join(ro, "bundle")
		writeBundle(t, p, bundle)
		if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			skipped.Store(true)
			t.Skipf("cannot remount tmpfs read-only: %v", err)
		}
		wantRefused(t, runShim(t, []string{"--secret-path", p, childBin}, nil), codePathUnlinkFailed)
		wantUnchanged(t, p, bundle)
	})
}

func wantUnchanged(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s changed: %q, %v", p, got, err)
	}
}

// pipeWith returns a pipe's read end holding data, its write end closed.
func pipeWith(t *testing.T, data []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return r
}

func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestPipeDelivery(t *testing.T) {
	bundle := testBundle(60)
	t.Run("on fd 3", func(t *testing.T) {
		r := runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, pipeWith(t, bundle))
		wantDelivered(t, r, string(bundle))
	})
	t.Run("on fd 5 with strays on 3 and 4", func(t *testing.T) {
		// fd 3 and 4 leak in from the parent: the sweep closes them and the
		// copy takes fd 3.
		r := runShim(t, []string{"--secret-pipe-fd", "5", "--secret-pipe-timeout", "10", childBin}, nil,
			devNull(t), devNull(t), pipeWith(t, bundle))
		wantDelivered(t, r, string(bundle))
	})
	t.Run("exactly 64 KiB", func(t *testing.T) {
		big := testBundle(maxBundle)
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		go func() { pw.Write(big); pw.Close() }()
		wantDelivered(t, runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, pr), string(big))
	})
	t.Run("write end leaked into the shim", func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		// The shim inherits both ends; the test writes and closes its own
		// copy, so EOF arrives only if the shim closed the one it holds.
		cmd := exec.Command(shimBin, "--secret-pipe-fd", "3", "--secret-pipe-timeout", "20", childBin)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.ExtraFiles = []*os.File{pr, pw}
		r := runCmd(t, cmd, func() {
			pw.Write(bundle)
			pw.Close()
		})
		wantDelivered(t, r, string(bundle))
	})
	t.Run("non-blocking stdin", func(t *testing.T) {
		// A non-blocking stdin makes the os package register it with the
		// runtime's poller at start, whose epoll descriptor then takes fd 3.
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		stdin, w := os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "w")
		defer stdin.Close()
		defer w.Close()
		// fd 3 is closed at start (a nil ExtraFiles entry), the pipe is on 4.
		cmd := exec.Command(shimBin, "--secret-pipe-fd", "4", childBin)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdin = stdin
		cmd.ExtraFiles = []*os.File{nil, pipeWith(t, bundle)}
		wantDelivered(t, runCmd(t, cmd, nil), string(bundle))
	})
	t.Run("runtime holds fd 3", func(t *testing.T) {
		// With the cgroup-aware GOMAXPROCS forced back on, the Go runtime
		// opens its cgroup CPU files at start, on fd 3 where the host has a
		// CPU controller: the shim must hand fd 3 over without clobbering it.
		r := runShim(t, []string{"--secret-pipe-fd", "4", childBin}, []string{"GODEBUG=containermaxprocs=1,updatemaxprocs=1"},
			nil, pipeWith(t, bundle))
		wantDelivered(t, r, string(bundle))
	})
}

func TestPipeRefusals(t *testing.T) {
	t.Run("too large", func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		go func() { pw.Write(testBundle(maxBundle + 1)); pw.Close() }()
		wantRefused(t, runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, pr), codeTooLarge)
	})
	t.Run("write end held by another process", func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		holder := exec.Command("sleep", "60")
		holder.ExtraFiles = []*os.File{pw}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { holder.Process.Kill(); holder.Wait() }()
		pw.Write([]byte(`{"partial":`))
		pw.Close()
		r := runShim(t, []string{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "1", childBin}, nil, pr)
		wantRefused(t, r, codePipeTimeout)
		// After the deadline, within a second of it (DESIGN §11 bounds every read).
		if r.elapsed < time.Second || r.elapsed > 2*time.Second {
			t.Errorf("refused after %v, want between 1s and 2s", r.elapsed)
		}
	})
	t.Run("default deadline", func(t *testing.T) {
		if testing.Short() {
			t.Skip("takes 5 s")
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close() // the test itself holds the write end open
		r := runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, pr, pw)
		// The shim closes its copy of the write end; the test's copy keeps the
		// pipe open, so only the 5 s default ends the wait.
		wantRefused(t, r, codePipeTimeout)
		if r.elapsed < DefaultPipeTimeout {
			t.Errorf("refused after %v, before the %v default", r.elapsed, DefaultPipeTimeout)
		}
	})
	t.Run("descriptor not open", func(t *testing.T) {
		wantRefused(t, runShim(t, []string{"--secret-pipe-fd", "9", childBin}, nil), codeReadFailed)
	})
	t.Run("descriptor is a regular file", func(t *testing.T) {
		// A file on disk is no pipe: its bytes would have reached CMD from
		// a mount, which path mode refuses. Before, they were delivered.
		p := filepath.Join(t.TempDir(), "bundle")
		if err := os.WriteFile(p, []byte(`{"k":"v"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		wantRefused(t, runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, f), codeReadFailed)
	})
	t.Run("descriptor is a character device", func(t *testing.T) {
		f, err := os.Open("/dev/zero")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		wantRefused(t, runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, f), codeReadFailed)
	})
	t.Run("descriptor is a directory", func(t *testing.T) {
		d, err := os.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		wantRefused(t, runShim(t, []string{"--secret-pipe-fd", "3", childBin}, nil, d), codeReadFailed)
	})
}

// TestExecAndUsage: exec failures and usage refusals of the real binary,
// argv and the environment passed through, and zero bytes written with no
// flag. Only the two path cases need a tmpfs (and CAP_SYS_ADMIN to mount it):
// they skip where mounting is not permitted, and the rest still runs. The
// whole test mounted first and skipped, so that unprivileged runs checked
// no usage refusal, no exec failure, nor that the shim with no flag writes
// nothing.
func TestExecAndUsage(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("no flag writes nothing", func(t *testing.T) {
		r := runShim(t, []string{"true"}, nil)
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("cruxshim true: exit %d, stdout %q, stderr %q; want 0 and zero bytes", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("no flag, no fd 3", func(t *testing.T) {
		r := runShim(t, []string{"--", childBin, "a", "b"}, []string{"KEEP=1"})
		var rep report
		if r.code != 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &rep) != nil {
			t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
		}
		if rep.FD3Open {
			t.Errorf("fd 3 is open in the child with no secret flag: %v", rep.FDs)
		}
		if strings.Join(rep.Argv, " ") != childBin+" a b" || !contains(rep.Env, "KEEP=1") {
			t.Errorf("argv %q env %q: want them passed through", rep.Argv, rep.Env)
		}
	})
	t.Run("argv and env pass through", func(t *testing.T) {
		p := filepath.Join(memMount(t, "tmpfs"), "b")
		b := testBundle(30)
		writeBundle(t, p, b)
		r := runShim(t, []string{"--secret-path", p, childBin, "--secret-path", p}, []string{"KEEP=1"})
		rep := wantDelivered(t, r, string(b), p)
		if strings.Join(rep.Argv, " ") != childBin+" --secret-path "+p || !contains(rep.Env, "KEEP=1") {
			t.Errorf("argv %q env %q: want them passed through", rep.Argv, rep.Env)
		}
	})
	execFailed := [][]string{
		{notExec},
		{"no-such-command-cruxshim"},
		{filepath.Join(t.TempDir(), "missing")},
		{"--secret-pipe-fd", "3", notExec},
		{"--secret-pipe-fd", "3", "no-such-command-cruxshim"},
	}
	for _, args := range execFailed {
		t.Run("exec failed "+strings.Join(args, " "), func(t *testing.T) {
			var extra []*os.File
			if args[0] == "--secret-pipe-fd" {
				extra = append(extra, pipeWith(t, testBundle(20)))
			}
			wantRefused(t, runShim(t, args, nil, extra...), codeExecFailed)
		})
	}
	t.Run("exec failed after path delivery", func(t *testing.T) {
		p := filepath.Join(memMount(t, "tmpfs"), "c")
		writeBundle(t, p, testBundle(30))
		wantRefused(t, runShim(t, []string{"--secret-path", p, notExec}, nil), codeExecFailed)
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the bundle path survived a failed exec")
		}
	})
	nowhere := filepath.Join(t.TempDir(), "x") // usage is refused before the path is looked at
	usage := [][]string{
		{},
		{"--"},
		{"--secret-path", nowhere},
		{"--secret-path", nowhere, "--"},
		{"--secret-path"},
		{"--secret-pipe-fd", "3"},
		{"--secret-pipe-fd", "2", "true"},
		{"--secret-pipe-fd", "three", "true"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "0", "true"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "5s", "true"},
		{"--secret-pipe-timeout", "1", "true"},
		{"--secret-path", "/x", "--secret-pipe-fd", "3", "true"},
		{"--secret-path", "/x", "--secret-path", "/y", "true"},
		{"--unknown", "true"},
		{"-x", "true"},
		{"--help"},
	}
	for _, args := range usage {
		t.Run("usage "+strings.Join(args, " "), func(t *testing.T) {
			wantRefused(t, runShim(t, args, nil), codeUsage)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBinaryStatic: the image entrypoint must run in an image with no libc.
func TestBinaryStatic(t *testing.T) {
	f, err := elf.Open(shimBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("cruxshim is dynamically linked (%v)", p.Type)
		}
	}
}

// BenchmarkStart measures what the shim adds to a container's start: /bin/true
// run directly, through cruxshim with no secret, and with a 1 KiB bundle from
// a pipe and from a tmpfs file.
func BenchmarkStart(b *testing.B) {
	bundle := bytes.Repeat([]byte("k"), 1024)
	run := func(b *testing.B, name string, args []string, extra func() *os.File) {
		for b.Loop() {
			cmd := exec.Command(name, args...)
			if extra != nil {
				f := extra()
				cmd.ExtraFiles = []*os.File{f}
				defer f.Close()
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, "/bin/true", nil, nil) })
	b.Run("no-secret", func(b *testing.B) { run(b, shimBin, []string{"/bin/true"}, nil) })
	b.Run("pipe", func(b *testing.B) {
		run(b, shimBin, []string{"--secret-pipe-fd", "3", "/bin/true"}, func() *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			w.Write(bundle)
			w.Close()
			return r
		})
	})
	b.Run("path", func(b *testing.B) {
		dir := b.TempDir()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			b.Skipf("cannot mount tmpfs: %v", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		p := filepath.Join(dir, "bundle")
		for b.Loop() {
			if err := os.WriteFile(p, bundle, 0o600); err != nil {
				b.Fatal(err)
			}
			if out, err := exec.Command(shimBin, "--secret-path", p, "/bin/true").CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}

// TestProtocolFDEnv: with --protocol-fd-env NAME, CMD starts with fd 1 on
// stderr and the shim's fd 1 (the protocol channel) on a descriptor of its
// own from ProtocolFD up, which NAME names (any NAME= the shim got is
// replaced); fd 3 stays the secret's (nothing else inherited then), or
// unopened. So a harness's start-up code that writes fd 1 writes stderr,
// never the channel. As a plain exec and as pid 1 (the child started by
// the init), with and without a secret.
func TestProtocolFDEnv(t *testing.T) {
	for _, asInit := range []bool{false, true} {
		for _, secret := range []bool{false, true} {
			t.Run(fmt.Sprintf("init=%v/secret=%v", asInit, secret), func(t *testing.T) {
				args := []string{"--protocol-fd-env", "CRUX_FD"}
				var extra []*os.File
				bundle := testBundle(40)
				if secret {
					args = append(args, "--secret-pipe-fd", "3")
					extra = append(extra, pipeWith(t, bundle))
				}
				args = append(args, childBin)
				env := []string{"CRUX_FD=99"}
				var r result
				if asInit {
					r = runAsInit(t, args, env, extra...)
				} else {
					r = runShim(t, args, env, extra...)
				}
				// The child prints its report on its fd 1: stderr now.
				if r.code != 0 || r.stdout != "" {
					t.Fatalf("exit %d, stdout %q (the channel), stderr %q: want the report on stderr, nothing on the channel", r.code, r.stdout, r.stderr)
				}
				var rep report
				if err := json.Unmarshal([]byte(r.stderr), &rep); err != nil {
					t.Fatalf("stderr %q: %v", r.stderr, err)
				}
				var vars []string
				for _, kv := range rep.Env {
					if strings.HasPrefix(kv, "CRUX_FD=") {
						vars = append(vars, kv)
					}
				}
				if len(vars) != 1 {
					t.Fatalf("CMD's environment names the channel %q, want once", vars)
				}
				n, err := strconv.Atoi(strings.TrimPrefix(vars[0], "CRUX_FD="))
				if err != nil || n < ProtocolFD {
					t.Fatalf("%s: want a descriptor from %d up", vars[0], ProtocolFD)
				}
				if rep.FDs[1] != rep.FDs[2] || !strings.HasPrefix(rep.FDs[n], "pipe:") || rep.FDs[n] == rep.FDs[1] {
					t.Errorf("fd 1 %q, fd 2 %q, channel fd %d %q: want fd 1 on stderr and the channel apart", rep.FDs[1], rep.FDs[2], n, rep.FDs[n])
				}
				if secret {
					// The sweep left 0, 1, 2, the memory file and the channel.
					if !rep.FD3Open || rep.FD3 != string(bundle) {
						t.Errorf("fd 3 (open %v) does not hold the bundle", rep.FD3Open)
					}
					if len(rep.FDs) != 5 {
						t.Errorf("CMD inherited %v, want 0, 1, 2, 3 and %d", rep.FDs, n)
					}
				} else if rep.FD3Open {
					t.Errorf("fd 3 is open without a secret: %v", rep.FDs)
				}
			})
		}
	}
}

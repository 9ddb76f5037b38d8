package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
)

// outOfFDsEnv tells the test binary it is TestStartOutOfFDs's child
// ("1"), or TestStartOutOfFDsNoCloseRange's (noCloseRange).
const (
	outOfFDsEnv  = "CRUXPROV_PODMAN_OUT_OF_FDS_CHILD"
	noCloseRange = "no-close-range"
)

// TestStartOutOfFDs: a run started with its process out of descriptors
// (EMFILE) is refused container_unavailable wherever Start runs out:
// the secret pipe (or in path mode the lock on the private tmpfs, and
// the bundle's write to it), the run directory's lock, each of the
// three stdio pipes (newStdio), podman's start. Each refusal says what
// to do, and leaves nothing: no podman run, no descriptor, no run
// directory, no secret tmpfs. Before, only newStdio's said so: "cannot
// make the secret pipe: pipe2: too many open files" and the others said
// nothing of descriptors. The descriptor table is filled in a child
// process (the test binary again, TestStartOutOfFDsChild), where
// nothing else runs.
func TestStartOutOfFDs(t *testing.T) {
	runOutOfFDsChild(t, "1")
}

// TestStartOutOfFDsNoCloseRange: where close_range(2) is refused (a
// kernel before 5.11, or, as here, a seccomp filter), the sweep that
// keeps this process's descriptors from podman (invoke.CloseInherited)
// lists /proc/self/fd, which a process out of descriptors cannot open:
// Start then refuses container_unavailable, saying so and what to do,
// starting nothing and leaving nothing (TestStartOutOfFDs's walk, in a
// child whose close_range a seccomp filter refuses).
func TestStartOutOfFDsNoCloseRange(t *testing.T) {
	runOutOfFDsChild(t, noCloseRange)
}

// runOutOfFDsChild runs TestStartOutOfFDsChild in a child process, with
// outOfFDsEnv set to how.
func runOutOfFDsChild(t *testing.T, how string) {
	if os.Getenv(outOfFDsEnv) != "" {
		t.Skip("the child runs TestStartOutOfFDsChild")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartOutOfFDsChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), outOfFDsEnv+"="+how)
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "--- SKIP: TestStartOutOfFDsChild ") {
		t.Skipf("the child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestStartOutOfFDsChild") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	t.Logf("the child:\n%s", out)
}

// TestStartOutOfFDsChild is TestStartOutOfFDs's child.
func TestStartOutOfFDsChild(t *testing.T) {
	how := os.Getenv(outOfFDsEnv)
	if how == "" {
		t.Skip("TestStartOutOfFDs runs it in a child process")
	}
	if how == noCloseRange {
		if err := refuseCloseRange(); err != nil {
			t.Skipf("cannot install a seccomp filter refusing close_range(2): %v", err)
		}
	}
	modes := []string{SecretPipe}
	if os.Geteuid() == 0 {
		modes = append(modes, SecretPath) // its tmpfs needs root
	}
	ownerID() // its /proc read, once, before the descriptors run out
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			var stdio int
			var msgs []string
			for free := 0; ; free++ {
				if free > 32 {
					t.Fatal("Start still refused with 32 descriptors free")
				}
				msg, started := startWithFree(t, mode, free)
				if started {
					break
				}
				t.Logf("%d free: %s", free, msg)
				msgs = append(msgs, msg)
				if strings.Contains(msg, "cannot make the pipes for the container's stdin, stdout and stderr") {
					stdio++
				}
			}
			// Each pipe takes two descriptors: each of the three fails
			// with none, then one, free.
			if stdio < 3 {
				t.Errorf("newStdio failed %d times, want each of its three pipes to fail", stdio)
			}
			const sweep = "cannot keep this process's open descriptors from podman, so it was not started"
			swept := slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, sweep) })
			if how == noCloseRange && !swept {
				t.Errorf("no refusal said %q: close_range(2) refused, the sweep's walk of /proc/self/fd must fail out of descriptors", sweep)
			}
			if mode != SecretPath {
				return
			}
			// The private tmpfs's steps that take a descriptor: its
			// lock (before, a mount that could not be locked went on
			// unlocked, for another executor's prune to unmount under
			// the run), then the bundle's write (before, its failure
			// went unseen: the run started with no bundle for the shim
			// to read).
			for _, step := range []string{"cannot lock the run's private tmpfs", "cannot write the bundle to the private tmpfs"} {
				if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, step) }) {
					t.Errorf("no refusal said %q", step)
				}
			}
		})
	}
}

// startWithFree starts a run of a podman that records that it ran, in
// secret mode mode, with free descriptors left to this process; it
// checks a refusal (and what it leaves), and returns its message, or
// that the run started (and is now over).
func startWithFree(t *testing.T, mode string, free int) (string, bool) {
	t.Helper()
	tmp, secretDir, dir := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Cleanup(func() {
		// A leaked secret tmpfs would stay mounted in the test's temp
		// directory: unmounted whatever (the check is below).
		ents, _ := os.ReadDir(secretDir)
		for _, e := range ents {
			_ = syscall.Unmount(filepath.Join(secretDir, e.Name()), syscall.MNT_DETACH)
		}
	})
	ran := filepath.Join(dir, "ran")
	wrapper := filepath.Join(dir, "podman")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$@\" >> "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &backend{e: &Executor{Podman: wrapper, SecretMode: mode, SecretDir: secretDir}, id: "0123"}
	spawn := &invoke.Spawn{Call: &invoke.Call{}, Attempt: "att_outoffds", Request: []byte("{}\n"), Bundle: []byte(`{"secrets":{}}`),
		Budgets: invoke.Budgets{TimeoutMS: 10000, OutputBytes: 1 << 20}, Stdout: io.Discard, Stderr: io.Discard}

	before := openFDs(t)
	restore := exhaustFDs(t, free)
	p, err := b.Start(context.Background(), spawn)
	restore()
	if err == nil {
		code, _, werr := p.Wait()
		if werr != nil || code != 0 {
			t.Errorf("with %d descriptors free the run started, then: %d %v", free, code, werr)
		}
		return "", true
	}
	msg := err.Error()
	if refusal.CodeOf(err) != refusal.ContainerUnavailable || !errors.Is(err, syscall.EMFILE) || !strings.Contains(msg, "out of file descriptors") {
		t.Errorf("%d free: %v; want container_unavailable for EMFILE, saying the process is out of file descriptors", free, err)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("%d free: podman ran: %s", free, b)
	}
	if leaked := leakedFDs(t, before); len(leaked) != 0 {
		t.Errorf("%d free: descriptors left open: %s", free, strings.Join(leaked, ", "))
	}
	for _, d := range []string{tmp, secretDir} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("%d free: left in %s: %v", free, d, left)
		}
	}
	return msg, false
}

// refuseCloseRange installs, on every thread of this process and on
// all it starts, a seccomp filter under which close_range(2) fails
// EPERM, as a container runtime's may refuse a call it does not know
// (setting no_new_privs, which an unprivileged filter needs).
func refuseCloseRange() error {
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("no audit arch known for %s", runtime.GOARCH)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: arch, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_CLOSE_RANGE, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	// TSYNC: every thread of the process, not only this one.
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	if err := unix.CloseRange(math.MaxInt32, math.MaxInt32, unix.CLOSE_RANGE_CLOEXEC); err != unix.EPERM {
		return fmt.Errorf("close_range(2) under the filter: %v, want EPERM", err)
	}
	return nil
}

// exhaustFDs lowers this process's descriptor limit a little above the
// descriptors it has open and fills the table to it, but for free
// descriptors; the function it returns empties it and restores the
// limit.
func exhaustFDs(t *testing.T, free int) func() {
	t.Helper()
	var saved syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	high := 0
	for _, fd := range openFDs(t) {
		if n, err := strconv.Atoi(fd); err == nil && n > high {
			high = n
		}
	}
	lim := saved
	lim.Cur = uint64(high + 64)
	if lim.Cur > lim.Max {
		t.Skipf("the descriptor limit %d is too low to test", lim.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []int
	for {
		fd, err := syscall.Dup(2)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		fill = append(fill, fd)
	}
	if free > len(fill) {
		t.Fatalf("only %d descriptors to free", len(fill))
	}
	for _, fd := range fill[len(fill)-free:] {
		syscall.Close(fd)
	}
	fill = fill[:len(fill)-free]
	return func() {
		for _, fd := range fill {
			syscall.Close(fd)
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
			t.Fatal(err)
		}
	}
}

// openFDs lists this process's open descriptors.
func openFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var fds []string
	for _, e := range ents {
		fds = append(fds, e.Name())
	}
	return fds
}

// leakedFDs returns the descriptors this process holds that are not in
// before, with what they are, once a moment has passed for any to close
// (a goroutine's).
func leakedFDs(t *testing.T, before []string) []string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var leaked []string
		for _, fd := range openFDs(t) {
			if !slices.Contains(before, fd) {
				target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd))
				leaked = append(leaked, fmt.Sprintf("%s -> %s", fd, target))
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
	}
}

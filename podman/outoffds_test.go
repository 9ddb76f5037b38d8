package podman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
)

// outOfFDsEnv tells the test binary it is TestStartOutOfFDs's child.
const outOfFDsEnv = "CRUXPROV_PODMAN_OUT_OF_FDS_CHILD"

// TestStartOutOfFDs: a run started with its process out of descriptors
// (EMFILE) is refused container_unavailable wherever Start runs out:
// the secret pipe (or in path mode the lock on the private tmpfs, and
// the bundle's write to it), the run directory's lock, each of the three stdio pipes
// (newStdio), podman's start. Each refusal says what to do, and
// leaves nothing: no podman run, no descriptor, no run directory, no
// secret tmpfs. Before, only newStdio's said so: "cannot make the secret
// pipe: pipe2: too many open files" and the others said nothing of
// descriptors. The descriptor table is filled in a child process (the
// test binary again, TestStartOutOfFDsChild), where nothing else runs.
func TestStartOutOfFDs(t *testing.T) {
	if os.Getenv(outOfFDsEnv) != "" {
		t.Skip("the child runs TestStartOutOfFDsChild")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartOutOfFDsChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), outOfFDsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestStartOutOfFDsChild") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	t.Logf("the child:\n%s", out)
}

// TestStartOutOfFDsChild is TestStartOutOfFDs's child.
func TestStartOutOfFDsChild(t *testing.T) {
	if os.Getenv(outOfFDsEnv) == "" {
		t.Skip("TestStartOutOfFDs runs it in a child process")
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

package invoke

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sysProcAttr is the child's: its own session (so its own process group,
// and no controlling terminal: a provider cannot open /dev/tty to write
// past the output budget onto the operator's screen, or push keystrokes
// into the operator's shell with TIOCSTI, which the kernel allows only on
// one's controlling terminal) and, with ns, its own
// user namespace (the caller's uid and gid mapped to themselves, so file
// access is unchanged) and pid namespace, whose first process is the
// shell of initScript in front of the harness (or the sandbox launcher):
// when it dies the kernel kills every
// process left in the namespace, setsid() ones included. The child gets
// SIGKILL when the executor dies (Pdeathsig): an executor killed mid-run
// cannot enforce the timeout, and a retry under the same key must not run
// beside the orphan.
func sysProcAttr(ns bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if ns {
		uid, gid := os.Geteuid(), os.Getegid()
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return a
}

// nsAnswer is what namespacesAllowed last found: whether the kernel
// allowed the namespaces, and when it refused them.
var nsAnswer struct {
	sync.Mutex
	known, allowed bool
	refusedAt      time.Time
}

// nsRetry is how long a refusal is believed: a refusal can pass (the
// user namespace count at its limit while many runs start), and an
// executor that stays up must not run without its namespaces for ever
// after one.
const nsRetry = time.Minute

// namespacesAllowed reports whether the kernel lets this process give a
// run its user and pid namespaces, by starting argv in them: initShell
// with ":" (~5 ms here: BenchmarkNamespacesProbe), or where there is no
// shell the env's interpreter doing nothing. It remembers an allowance
// until a run's start is refused (forgetNamespaces) and a refusal for
// nsRetry: an executor that stays up asks about once, a `cruxprov run`
// once per run.
func namespacesAllowed(argv []string) bool {
	nsAnswer.Lock()
	defer nsAnswer.Unlock()
	if nsAnswer.known && (nsAnswer.allowed || time.Since(nsAnswer.refusedAt) < nsRetry) {
		return nsAnswer.allowed
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.SysProcAttr = sysProcAttr(true)
	err := cmd.Run()
	nsAnswer.known, nsAnswer.allowed = true, err == nil || !nsUnavailable(err)
	if !nsAnswer.allowed {
		nsAnswer.refusedAt = time.Now()
	}
	return nsAnswer.allowed
}

// forgetNamespaces makes the next namespacesAllowed ask again: a run's
// start was refused the namespaces the last answer allowed.
func forgetNamespaces() {
	nsAnswer.Lock()
	nsAnswer.known = false
	nsAnswer.Unlock()
}

// nsProbe is the argv namespacesAllowed starts: initShell doing nothing,
// or with no shell (nil) the caller's interpreter.
func nsProbe() []string {
	if initShell == "" {
		return nil
	}
	return []string{initShell, "-c", ":"}
}

// initScript is the first process of a run's pid namespace, in front of
// the harness: a POSIX shell that runs it as a foreground child (stdin,
// the secret descriptor and the signal dispositions as they were given),
// reaps every process orphaned into the namespace while it waits (a
// shell's wait takes any child), and exits with the harness's status,
// 128+N when signal N killed it. The harness is then an ordinary process:
// the kernel ignores any signal a namespace's first process has no
// handler for, its own included, so as that process a provider's
// os.kill(os.getpid(), SIGTERM) or os.abort() did nothing. The shell's
// own stderr goes to /dev/null (dash reports a child killed by a signal
// there, "Terminated"), the harness's stays the run's. The executor
// signals every process of the namespace itself (signalRun), so the shell
// forwards nothing. It costs a shell's start, ~2 ms here, where the
// harness forking an init in front of itself (what it does as the first
// process, as in a container) cost ~50 ms of copy-on-write faults a run.
// The shell exports PWD, which the run's environment does not have unless
// it was given (environ), so it is unset first when it was not.
// `ulimit -c 0` (soft and hard) keeps every process of the run from
// dumping core: the harness holds the secret bundle, and a core file (or
// systemd-coredump's store) outlives the run; the executor's own limit,
// unlimited under many services, was inherited (TestNoCoreDumps).
const initScript = `exec 9>&2 2>/dev/null; ulimit -c 0; (exec "$@" 2>&9 9>&-); exit $?`

// initShell is the shell initScript runs in ("" where there is none: the
// harness then forks its own init).
var initShell = func() string {
	if fi, err := os.Stat("/bin/sh"); err == nil && fi.Mode()&0o111 != 0 {
		return "/bin/sh"
	}
	return ""
}()

// withInit returns argv run behind initScript, where there is a shell,
// with the environment env the harness gets.
func withInit(argv, env []string) []string {
	if initShell == "" {
		return argv
	}
	script := initScript
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PWD=") }) {
		script = "unset PWD; " + script
	}
	return append([]string{initShell, "-c", script, "cruxprov-init"}, argv...)
}

// nsUnavailable reports whether a Start error means the kernel (or a
// seccomp filter) refuses the namespaces, so the run falls back to the
// process group and a descendant walk.
func nsUnavailable(err error) bool {
	for _, e := range []syscall.Errno{syscall.EPERM, syscall.EINVAL, syscall.ENOSPC, syscall.EACCES, syscall.EUSERS, syscall.ENOSYS} {
		if isErrno(err, e) {
			return true
		}
	}
	return false
}

func isErrno(err error, e syscall.Errno) bool {
	for err != nil {
		if x, ok := err.(syscall.Errno); ok {
			return x == e
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// procFDs is the directory cloexecAll lists where close_range(2) cannot
// mark the descriptors, and closeRange that call: variables for tests
// (export_linux_test.go).
var (
	procFDs    = "/proc/self/fd"
	closeRange = unix.CloseRange
)

// cloexecAll marks every descriptor of this process above the standard
// streams close-on-exec, so that one an embedding program opened without
// O_CLOEXEC cannot leak into the child (os/exec closes nothing itself).
// Descriptors opened concurrently by other threads after the sweep are
// not covered: Go opens its own with O_CLOEXEC.
//
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11) marks them all in
// one call and needs neither a descriptor nor /proc; where it fails
// (ENOSYS before 5.9, EINVAL before 5.11, or a seccomp filter's EPERM)
// the descriptors listed in /proc/self/fd are marked one by one. Where
// neither can be done it returns an error saying why and what to do:
// the walk alone did nothing, silently, in a process out of descriptors
// (EMFILE: it could not open /proc/self/fd) or without /proc, and every
// descriptor the run should not have reached it.
func cloexecAll() error {
	crErr := closeRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if crErr == nil {
		return nil
	}
	d, err := os.Open(procFDs)
	if err != nil {
		return cloexecError(crErr, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return cloexecError(crErr, err)
	}
	own := int(d.Fd())
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || fd == own {
			continue
		}
		// A descriptor closed since the listing (EBADF) needs nothing.
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, fl|unix.FD_CLOEXEC)
		}
	}
	return nil
}

// cloexecError is cloexecAll's failure: close_range(2) failed with crErr
// and the list of the descriptors with err.
func cloexecError(crErr, err error) error {
	todo := OutOfFDs(err)
	switch {
	case todo != "":
	case errors.Is(err, os.ErrNotExist):
		todo = "/proc is not mounted here: mount it, or run on Linux 5.11 or later, whose close_range(2) needs no /proc"
	default:
		todo = "run where /proc/self/fd can be read, or on Linux 5.11 or later, whose close_range(2) needs no /proc"
	}
	return fmt.Errorf("close_range(2) could not mark them close-on-exec (%v), and their list could not be read (%w): %s", crErr, err, todo)
}

// initAlone reports whether the init shell pid (withInit's) has no child:
// it has not started the harness yet, or the harness has ended. False
// when the kernel does not say (no /proc/PID/task/TID/children).
func initAlone(pid int) bool {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	return err == nil && len(bytes.TrimSpace(b)) == 0
}

// dropsSignal reports whether pid, the first process of a pid namespace,
// would drop sig: it neither catches nor blocks it (/proc/PID/status),
// and the kernel discards a signal such a process has no handler for (a
// blocked one waits for the handler the process may install). The
// harness is that process where there is no init shell (withInit) until
// it forks its own init, which catches SIGTERM to pass it on: a SIGTERM
// that came before (the interpreter's start, site's .pth files) was
// dropped, and the provider ran to the grace's SIGKILL. False when the
// kernel does not say.
func dropsSignal(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	seen := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		k, v, _ := bytes.Cut(l, []byte(":"))
		if string(k) != "SigCgt" && string(k) != "SigBlk" {
			continue
		}
		m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		if err != nil || m&(1<<(sig-1)) != 0 {
			return false
		}
		seen++
	}
	return seen == 2
}

// nsOf returns the pid namespace of pid ("pid:[inode]"), or "".
func nsOf(pid int) string {
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return ""
	}
	return l
}

// members returns the processes of a run: root and its descendants by
// parent link, and with ns every process in the pid namespace ns besides
// (a descendant in a pid namespace nested in it, as a sandbox such as
// bwrap makes one, has a namespace of its own: it was never signalled, and
// bwrap, the run's first process, drops a SIGTERM as such, so a
// sandboxed run took the grace to end and its provider never saw the
// SIGTERM).
func members(root int, ns string) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	parent := map[int]int{}
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if ns != "" && (pid == root || nsOf(pid) == ns) {
			out = append(out, pid)
			continue
		}
		if pp, ok := ppid(pid); ok {
			parent[pid] = pp
		}
	}
	for pid := range parent {
		for p, hops := pid, 0; p > 1 && hops < 4096; p, hops = parent[p], hops+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// runDropsSignal reports whether no process of the run (members) would
// act on sig: each is the first process of its pid namespace and neither
// catches nor blocks it (dropsSignal). Behind a sandbox that is so until
// the harness has started (bwrap, and the init of the namespace it makes,
// have no handler for SIGTERM): the SIGTERM was lost, and the sandbox went
// on to start the harness, which ran to the grace's SIGKILL. False when
// the kernel does not say.
func runDropsSignal(root int, ns string, sig syscall.Signal) bool {
	ms := members(root, ns)
	for _, p := range ms {
		if !firstOfNamespace(p) || !dropsSignal(p, sig) {
			return false
		}
	}
	return len(ms) > 0
}

// firstOfNamespace reports whether pid is the first process (pid 1) of
// its own pid namespace: the last of its NSpid (/proc/PID/status).
func firstOfNamespace(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if k, v, ok := bytes.Cut(l, []byte(":")); ok && string(k) == "NSpid" {
			f := bytes.Fields(v)
			return len(f) > 0 && string(f[len(f)-1]) == "1"
		}
	}
	return false
}

func ppid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return statPPid(b)
}

// statPPid is field 4 of a /proc/PID/stat line, the parent's pid (the
// command name, field 2, may hold spaces and parentheses).
func statPPid(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	p, err := strconv.Atoi(string(f[1]))
	return p, err == nil && p >= 0
}

// signalRun sends sig to the run's process group and to every member.
func signalRun(pid int, ns string, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
	for _, p := range members(pid, ns) {
		_ = syscall.Kill(p, sig)
	}
}

// exitWatch returns a function that blocks until the child pid, not yet
// waited for, has exited, without reaping it (WNOWAIT): while it is a
// zombie its pid and process group cannot go to another process. It
// reports whether the child is gone (exited, or already reaped); false
// when the kernel would not say, and nothing is known. The child is
// named by a pidfd opened now, so a wait that starts after another
// goroutine reaped it cannot take a reused pid for it; where pidfds
// are refused (kernels before 5.3, or waitid without P_PIDFD before
// 5.4), by pid.
func exitWatch(pid int) func() bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	return func() bool {
		var info unix.Siginfo
		for {
			var werr error = unix.EINVAL
			if err == nil {
				werr = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOWAIT, nil)
			}
			if werr == unix.EINVAL {
				werr = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			}
			if werr != unix.EINTR {
				if err == nil {
					unix.Close(pidfd)
				}
				return werr == nil || werr == unix.ECHILD
			}
		}
	}
}

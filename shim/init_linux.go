package shim

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to CMD: a container runtime
// signals pid 1 only. The harness's own init (harness.py) forwards the same.
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

// asInit says whether the shim is the first process of its pid namespace
// (a container's pid 1), where it must not exec CMD but start it and stay as
// its init.
func asInit() bool { return unix.Getpid() == 1 }

// runInit starts CMD (path, argv, env) as a child and stays as the pid
// namespace's minimal init: the kernel ignores every signal a namespace's
// first process has no handler for, those it sends itself included, and
// re-parents the namespace's orphans to it, so CMD must not be that process.
// The child inherits the streams and every descriptor without close-on-exec
// (fd 3, the memory file, when there is a bundle), started with
// clone(CLONE_VFORK), not a copy of this process. The init then drops its
// own copies (stdin and stdout become /dev/null, every inherited descriptor
// from 3 up is closed: it holds none of the run's but stderr), reaps every
// child, orphans included, passes the forwarded signals on to CMD, drops
// every other signal (as the kernel would for an init without a handler),
// and exits as CMD did: its exit status, or 128+N when signal N killed it.
// It returns only when CMD cannot be started, with exec_failed.
func runInit(path string, argv, env []string) error {
	// SIGHUP and SIGINT ignored at the shim's start stay ignored for CMD,
	// as across an exec (asked before Notify, which un-ignores them): CMD
	// is started with them ignored, and they are forwarded once it is.
	hup, intr := signal.Ignored(unix.SIGHUP), signal.Ignored(unix.SIGINT)
	// Caught from before the start, so that none ends the init before
	// CMD exists; one that comes early is passed on once it does.
	fwd := make(chan os.Signal, 16)
	signal.Notify(fwd, forwarded...)
	// Every other signal is caught and dropped (the channel is never read).
	signal.Notify(make(chan os.Signal, 1))
	if hup {
		signal.Ignore(unix.SIGHUP)
	}
	if intr {
		signal.Ignore(unix.SIGINT)
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return refuse(codeExecFailed)
	}
	// CMD has exec'd with them ignored; the init now catches them too and
	// passes them on, as a signal sent to an exec'd CMD would reach it: a
	// CMD that installs its own handler gets them (one that does not still
	// ignores them). Ignored here, the init dropped them, so a CMD with a
	// handler never saw the SIGHUP or SIGINT sent to the container.
	if hup {
		signal.Notify(fwd, unix.SIGHUP)
	}
	if intr {
		signal.Notify(fwd, unix.SIGINT)
	}
	dropRunFDs()
	go func() {
		for s := range fwd {
			_ = unix.Kill(pid, s.(unix.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			os.Exit(1) // CMD is gone without a status: cannot happen
		case got != pid:
			continue // an orphan, reaped
		case ws.Signaled():
			os.Exit(128 + int(ws.Signal()))
		case ws.Exited():
			os.Exit(ws.ExitStatus())
		}
	}
}

// dropRunFDs leaves the init holding none of the run's descriptors but
// stderr: stdin and stdout are replaced by /dev/null (so the init never keeps
// a pipe of the run open), and every descriptor from 3 up without
// close-on-exec (the memory file, anything else inherited) is closed; the Go
// runtime's own all have close-on-exec and are left alone.
func dropRunFDs() {
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Dup3(null, 0, 0)
		_ = unix.Dup3(null, 1, 0)
		unix.Close(null)
	}
	fds, _ := listFDs()
	for _, fd := range fds {
		if fd < 3 {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

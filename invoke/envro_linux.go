package invoke

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// roThread is an OS thread of its own whose mount namespace shows a run's
// env read-only, on which the run's process is started: Go's fork clones
// from the calling thread, so the child (which then enters its user and
// pid namespaces, sysProcAttr) inherits that mount namespace and sees the
// env read-only, and so does everything it starts. The sealed env's 0555
// and 0444 modes stop every user but root; a run as root wrote into it
// (a Python subprocess started isolated, `sys.executable -I`, writes the
// bytecode of an env made without it; any root code can write), and the
// next call's verify refused the env env_drift until it was made again.
//
// The mount namespace is made by this (root) process, owned by the initial
// user namespace: a provider in the run's user namespace cannot remount
// the bind read-write nor unmount it (in a mount namespace it makes
// itself, the copied mounts are locked). Without the user namespace
// (refused by the kernel, or Subprocess.NoNamespaces) root's provider
// holds every capability and could remount it deliberately; the view
// then keeps accidental writes out, bytecode among them.
//
// The thread is never given back to Go's scheduler (its goroutine ends
// locked to it, and Go ends the thread), and it lives until the run has
// been waited for: the child's parent-death signal (Pdeathsig) fires when
// the thread that forked it ends.
type roThread struct {
	start   chan *exec.Cmd
	started chan error
	done    chan struct{}
	once    sync.Once
}

// readOnlyEnv returns a thread whose mount namespace shows env read-only,
// or the error that kept it from being made (the kernel refuses the
// mount namespace to an executor without CAP_SYS_ADMIN, as in a
// container). Nothing of it is seen outside the thread: its namespace's
// mounts are made private first, so the bind does not propagate back to
// the host's. Release must be called once the run is over.
func readOnlyEnv(env string) (*roThread, error) {
	t := &roThread{start: make(chan *exec.Cmd), started: make(chan error), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go ends the thread with this goroutine
		if unix.Gettid() == unix.Getpid() {
			// The main thread: Go does not end it when its goroutine ends
			// locked but keeps it, idle, for ever, with a namespace that
			// would outlive the run (and that /proc/self, the main
			// thread's, would show). This goroutine holds it, so the one
			// below runs on another.
			inner := make(chan struct{})
			go func() { t.serve(env, ready); close(inner) }()
			<-inner
			runtime.UnlockOSThread()
			return
		}
		t.serve(env, ready)
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// serve runs on the locked thread: it makes the read-only view, says
// whether it could, starts the run's process when given it and holds the
// thread until Release.
func (t *roThread) serve(env string, ready chan<- error) {
	runtime.LockOSThread() // never unlocked
	if err := viewReadOnly(env); err != nil {
		ready <- err
		return
	}
	ready <- nil
	select {
	case cmd := <-t.start:
		t.started <- cmd.Start()
		<-t.done
	case <-t.done:
	}
}

// viewReadOnly gives the calling thread a mount namespace of its own in
// which env is a read-only bind of itself.
func viewReadOnly(env string) error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("cannot give the run a mount namespace of its own: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("cannot make the run's mounts private: %w", err)
	}
	if err := unix.Mount(env, env, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("cannot bind the env %s: %w", env, err)
	}
	// A remount must keep the flags the kernel locked on the mount (those
	// of a mount copied from a more privileged namespace), or it is
	// refused EPERM: nosuid, nodev and noexec are kept as they are (the
	// atime flags are kept when none is given).
	var st unix.Statfs_t
	if err := unix.Statfs(env, &st); err != nil {
		return fmt.Errorf("cannot read the env's mount flags: %w", err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC}} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", env, "", flags, ""); err != nil {
		return fmt.Errorf("cannot make the env %s read-only: %w", env, err)
	}
	return nil
}

// Start starts cmd on the thread.
func (t *roThread) Start(cmd *exec.Cmd) error {
	t.start <- cmd
	return <-t.started
}

// Release ends the thread, and with it its mount namespace: after the run
// has been waited for, or when it was never started.
func (t *roThread) Release() { t.once.Do(func() { close(t.done) }) }

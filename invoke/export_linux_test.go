package invoke

import (
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// WithoutShell makes this process's runs go as where there is no
// /bin/sh (the harness forks its own init; the env's interpreter asks
// the kernel for the namespaces) until the returned func is called.
func WithoutShell() (restore func()) {
	old := initShell
	initShell = ""
	forgetNamespaces()
	return func() {
		initShell = old
		forgetNamespaces()
	}
}

// InstalledRuntime is installedRuntime, for TestInstalledRuntime.
var InstalledRuntime = installedRuntime

// MountNamespaceRefused reports whether the kernel refuses this process a
// mount namespace (asked on a thread that ends with the answer).
func MountNamespaceRefused() bool {
	refused := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends
		refused <- unix.Unshare(unix.CLONE_NEWNS) != nil
	}()
	return <-refused
}

// SetCloexecFallback makes the descriptor sweep before a run (and
// CloseInherited) find close_range(2) missing (ENOSYS) where noCloseRange,
// and list dir where it lists /proc/self/fd ("": that), until restore is
// called.
func SetCloexecFallback(noCloseRange bool, dir string) (restore func()) {
	oldCR, oldDir := closeRange, procFDs
	if noCloseRange {
		closeRange = func(uint, uint, uint) error { return unix.ENOSYS }
	}
	if dir != "" {
		procFDs = dir
	}
	return func() { closeRange, procFDs = oldCR, oldDir }
}

// SetRunSignal makes f see each kill of a started run before it is sent,
// until the returned func is called.
func SetRunSignal(f func(pid int, ns string, sig syscall.Signal)) (restore func()) {
	old := runSignal
	runSignal = func(pid int, ns string, sig syscall.Signal) {
		f(pid, ns, sig)
		old(pid, ns, sig)
	}
	return func() { runSignal = old }
}

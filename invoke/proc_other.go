//go:build !linux

package invoke

import (
	"errors"
	"os/exec"
	"syscall"
)

// Elsewhere than Linux there are no namespaces to ask for and no /proc to
// walk: the run is contained by its process group only.
func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func nsUnavailable(error) bool { return false }

// namespacesAllowed: there are none to give a run here.
func namespacesAllowed([]string) bool { return false }

func nsProbe() []string { return nil }

func forgetNamespaces() {}

// cloexecAll: no /proc to list the descriptors in here (nothing is marked).
func cloexecAll() error { return nil }

func nsOf(int) string { return "" }

func initAlone(int) bool { return false }

func dropsSignal(int, syscall.Signal) bool { return false }

func runDropsSignal(int, string, syscall.Signal) bool { return false }

func signalRun(pid int, _ string, sig syscall.Signal) { _ = syscall.Kill(-pid, sig) }

func withInit(argv, _ []string) []string { return argv }

// exitWatch: no waitid(WNOWAIT) to watch the harness's exit with apart
// from cmd.Wait here (nil): its leftovers are killed once cmd.Wait returns.
func exitWatch(int) func() bool { return nil }

// roThread: there is no mount namespace to show a root run its env
// read-only in here (readOnlyEnv always fails).
type roThread struct{}

func readOnlyEnv(string) (*roThread, error) {
	return nil, errors.New("no mount namespaces on this system")
}

func (*roThread) Start(cmd *exec.Cmd) error { return cmd.Start() }

func (*roThread) Release() {}

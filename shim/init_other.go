//go:build unix && !linux

package shim

// asInit is false off Linux: the shim execs CMD whatever its pid (a pid 1
// there is the system's own init, never a container's first process).
func asInit() bool { return false }

// runInit is never called off Linux (asInit is false).
func runInit(path string, argv, env []string) error { return refuse(codeExecFailed) }

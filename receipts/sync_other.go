//go:build !linux

package receipts

import "golang.org/x/sys/unix"

// datasync flushes fd: fsync where fdatasync does not exist (macOS).
func datasync(fd int) error { return unix.Fsync(fd) }

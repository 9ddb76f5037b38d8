package receipts

import "golang.org/x/sys/unix"

// datasync flushes fd's data (and the metadata needed to read it back).
func datasync(fd int) error { return unix.Fdatasync(fd) }

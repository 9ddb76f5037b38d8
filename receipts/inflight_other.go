//go:build !linux

package receipts

import "golang.org/x/sys/unix"

// setLockCmd takes and releases key locks. Without open file description
// locks these are POSIX record locks, owned by the process: they exclude
// other processes, but two Ledgers of one process on one path do not
// exclude each other (one Ledger per process and path is the contract).
const setLockCmd = unix.F_SETLK

// getLockCmd asks whether a key lock is held (KeyHeld): another process's
// only, as with setLockCmd.
const getLockCmd = unix.F_GETLK

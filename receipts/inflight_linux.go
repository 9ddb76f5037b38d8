package receipts

import "golang.org/x/sys/unix"

// setLockCmd takes and releases key locks: open file description locks,
// owned by the Ledger's descriptor, not by the process.
const setLockCmd = unix.F_OFD_SETLK

// getLockCmd asks whether a key lock is held (KeyHeld).
const getLockCmd = unix.F_OFD_GETLK

// Package watch owns the check an executor that stays up makes before
// every run (DESIGN §9): verify an env fully once, then keep watching it so
// that the next check costs O(1) while nothing changed.
//
// A Verifier wraps a full verify function (seal.Verify, or the pin-level
// verify that calls it). Its Verify runs that function only when the
// Verifier is dirty: on the first call, after any event on what it
// watches, after the kernel's event queue overflowed, and whenever a watch
// could not be placed (then every call verifies fully, and WatchErr says
// why). Otherwise it returns nil after one non-blocking read(2) of the
// inotify descriptor and one stat(2) of each path it was given (the env,
// the interpreters, each Spec.Extra): one that resolves to another file
// than when it was armed (a directory renamed or replaced above it, a
// symlink there re-pointed, which raise no event on anything watched) is
// a change. A full verify re-arms first: every watch is placed
// before the verify function runs, so a change made during or after the
// verify is an event, and nothing slips between the two.
//
// What is watched (inotify, golang.org/x/sys/unix; Linux only, elsewhere
// every call verifies fully):
//
//   - every directory of the env (symlinks not followed), for any change
//     of an entry: content written, attributes or times changed, created,
//     deleted, renamed in or out, and the directories themselves;
//   - the env's parent directory (envs/) for events that name the env,
//     its seal (<hex>.seal.json) or its stat index (<hex>.index), and the
//     seal and index files themselves;
//   - the interpreter and libpython, the seal's real paths and those
//     Spec names: each file, and its directory for events naming it;
//   - each Spec.Extra path (the registry directory): a directory with all
//     its subdirectories (symlinks in it followed, as its reader follows
//     them), a file itself, each with its directory for events naming it.
//
// Every path is resolved as the kernel resolves it, one component at a
// time (a symlink's target in its turn, ".." physically), and each
// directory it passes through is watched for events naming the component
// taken from it, before that component is read; the identity the check
// stats against is the file the watch was placed on. A directory above a
// path's last one that this user may search but not read cannot be
// watched: it is passed, and a change there is seen by the stat. Events that only read (open,
// access, close of a read-only descriptor) are not subscribed: running the
// provider does not make the Verifier dirty.
//
// What raises no inotify event, and so is not seen until something else
// makes the Verifier dirty (docs/executor.md): writes through a shared
// writable mmap, changes made by another host on a network file system,
// changes to an overlay's lower layer, a mount over a watched path other
// than those the check stats, and a write through a hard link made outside
// the env (materialization makes none).
//
// The pin's expiry, or anything else that must be checked on every call
// whatever the files say, is not this package's: the caller composes it
// around Verify (see the Verifier example). This package does not verify
// anything itself, read the environment, or print.
package watch

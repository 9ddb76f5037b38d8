// Package flock waits for a flock(2) lock in a way a context can end:
// the store's lock, the env lock, an index build's lock and an OCI
// layout's take their turns through it. It polls rather than blocks, so
// that no thread sits in the kernel once the caller has gone (a blocking
// waiter that wants to be served in turn, as the registry's, blocks in a
// goroutine of its own instead).
package flock

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Wait takes fd's flock (how: unix.LOCK_EX or unix.LOCK_SH). While
// another holds it, it calls blocked (when not nil) and polls, from 1 ms
// doubling to 100 ms, until the lock is held (nil), ctx ends (ctx.Err(),
// unwrapped), or flock fails otherwise (its error: a file system that
// takes no flock, say). A signal interrupting flock is waited through.
func Wait(ctx context.Context, fd int, how int, blocked func()) error {
	for wait := time.Millisecond; ; {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if blocked != nil {
			blocked()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// Package aside owns the one way cruxprov stops waiting for work that does
// not look at a context: the scrypt of a private key (about a second of
// CPU, more on a loaded host) that key generate and changeset approve
// spend. A signal came during it and the command ended only once it was
// done: DESIGN §14 asks SIGINT and SIGTERM to stop work promptly. Run
// returns at ctx's end and drops the work's result when it comes; it is
// for work that writes nothing, whose caller writes what it returns. Stdlib
// only.
package aside

import "context"

// Run runs f on a goroutine of its own and returns what it returns, or
// ctx's error as soon as ctx ends (f then runs on to its end, and what it
// returns is dropped). An f that ends as ctx does may be either.
func Run[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

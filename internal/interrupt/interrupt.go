// Package interrupt catches SIGINT and SIGTERM from the first moments of
// the process, before main runs. A command line's main installed its
// handler only after every package's init had run, and the process's
// start (the runtime, ~150 package inits, the page faults of a 25 MB
// binary) took 40–180 ms on a loaded host: a Ctrl-C in that window
// killed the command silently, by Go's default (death by SIGINT, no
// message), where one a few milliseconds later said it was interrupted
// and exited 1. This package's init asks for both signals; it imports
// nothing but the standard library's signal packages, so it runs as soon
// as os/signal has (package inits run in import-path order, each once
// what it imports has). It owns the catching only: what a signal does (a
// first cancels the command, a second stops it at once) is the command
// line's. Stdlib only.
package interrupt

import (
	"os"
	"os/signal"
	"syscall"
)

// caught receives every SIGINT and SIGTERM from the init on; signal.Notify
// drops what does not fit, and a command line reads two at most.
var caught = make(chan os.Signal, 8)

func init() { signal.Notify(caught, os.Interrupt, syscall.SIGTERM) }

// Caught returns the channel that receives every SIGINT and SIGTERM the
// process got since its package inits, those that came before the caller
// looked first.
func Caught() <-chan os.Signal { return caught }

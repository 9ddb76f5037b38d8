package main

import (
	"context"
	"errors"
	"os"
)

// watchInterrupts returns a context that the first signal on sigs
// cancels, its cause as signal.NotifyContext gives it ("interrupt signal
// received"). sigs is internal/interrupt's: signals are caught from the
// process's package inits on, not from main's first line, since a Ctrl-C
// in the 40–180 ms a start takes on a loaded host killed the command
// silently (Go's default: death by SIGINT).
func watchInterrupts(sigs <-chan os.Signal) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		s := <-sigs
		cancel(errors.New(s.String() + " signal received"))
	}()
	return ctx
}

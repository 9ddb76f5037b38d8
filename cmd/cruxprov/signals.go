package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// What a signal does to a command (DESIGN §14: SIGINT and SIGTERM stop
// work promptly and leave the store consistent):
//
//   - the first cancels the command's context: the command stops cleanly
//     (it removes its debris, records a run's outcome) and says it was
//     interrupted, exit 1, as before;
//   - one that stops slowly (a run's provider given its grace, a removal
//     of what it staged) says after noticeAfter that it is stopping and
//     that a second signal stops it at once, once;
//   - a second SIGINT or SIGTERM ends the process at once, exit 1, with
//     one line saying so (and, with --json, the interrupted document when
//     nothing was written on stdout yet: stdout carries one document or
//     none, never half of one). It leaves what a SIGKILL leaves, against
//     which every write is safe, and the next command clears it as after
//     a kill. It was swallowed: signal.NotifyContext goes on catching
//     signals after the first, and an operator's second Ctrl-C did
//     nothing until the clean stop was over.
//
// Signals are caught from the process's package inits on
// (internal/interrupt), not from main's first line: a Ctrl-C in the
// 40–180 ms a start takes on a loaded host killed the command silently.

// noticeAfter is how long a command may take to stop after the first
// signal before it says that it is stopping and how to stop it at once:
// one that stops sooner says only that it was interrupted, its one line.
const noticeAfter = 500 * time.Millisecond

// forceWait bounds how long a forced exit waits for a write on stdout
// under way (a --json document is written in one write) or for a command
// already writing its result to end.
const forceWait = time.Second

// stoppingNotice is the line the first signal's slow stop prints.
const stoppingNotice = "interrupted: stopping cleanly; press Ctrl-C again (or send a second SIGTERM) to stop at once"

// forcedMessage is the line of a command a second signal stopped.
const forcedMessage = "interrupted again: stopped at once, as a killed command stops; what it was writing is left as a kill leaves it, and the next command clears it: run the command again to complete it"

// heldWriter serializes the writes to stdout, so that a forced exit can
// wait for a write under way and keep the others out (hold).
type heldWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int64 // bytes written
}

func (h *heldWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.w.Write(p)
	h.n += int64(n)
	return n, err
}

// hold takes the writer for good (the process is about to exit), waiting
// up to d for a write under way, and reports whether it has it.
func (h *heldWriter) hold(d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		if h.mu.TryLock() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// interrupts is the signal handling of one command line (the process's:
// main makes it). Stdout goes through a heldWriter; stderr is the file
// itself, which the progress bars and their terminal test need (a
// wrapper was no terminal: no bars): the notice and the forced exit's
// line are ordered with the command's result by mu.
type interrupts struct {
	stdout *heldWriter
	stderr io.Writer
	exit   func(code int)

	mu      sync.Mutex // held by a notice or a forced exit while it writes
	settled bool       // run is writing the command's result
	doc     any        // the --json document a forced exit writes, nil without --json
}

type interruptsKey struct{}

// watchInterrupts returns a context that the first signal on sigs
// cancels, its cause as signal.NotifyContext gives it ("interrupt signal
// received"), and the interrupts watching sigs: the streams to write the
// command's output to (stdout held, stderr as given), and what ends the
// process at a second signal.
func watchInterrupts(sigs <-chan os.Signal, stdout, stderr io.Writer, exit func(int)) (context.Context, *interrupts) {
	ir := &interrupts{stdout: &heldWriter{w: stdout}, stderr: stderr, exit: exit}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		s := <-sigs
		cancel(errors.New(s.String() + " signal received"))
		t := time.NewTimer(noticeAfter)
		select {
		case <-t.C:
			ir.notice()
			<-sigs
		case <-sigs:
			t.Stop()
		}
		ir.force()
	}()
	return context.WithValue(ctx, interruptsKey{}, ir), ir
}

// interruptsOf returns ctx's interrupts, nil for a run() that is not the
// process's (tests call it in-process).
func interruptsOf(ctx context.Context) *interrupts {
	ir, _ := ctx.Value(interruptsKey{}).(*interrupts)
	return ir
}

// notice says, once, that the command is stopping, unless it is writing
// its result already.
func (ir *interrupts) notice() {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if !ir.settled {
		fmt.Fprintf(ir.stderr, "%s\n", stoppingNotice)
	}
}

// force ends the process at a second signal.
func (ir *interrupts) force() {
	ir.mu.Lock() // never released: settle waits, and run writes nothing more
	if ir.settled {
		// The command is writing its result and ends as soon as it has;
		// one whose stdout does not take it ends here.
		ir.mu.Unlock()
		time.Sleep(forceWait)
		ir.exit(exitFailure)
		return
	}
	if ir.stdout.hold(forceWait) && ir.doc != nil && ir.stdout.n == 0 {
		writeJSON(ir.stdout.w, ir.doc)
	}
	fmt.Fprintf(ir.stderr, "error: %s\n", forcedMessage)
	ir.exit(exitFailure)
}

// expect records the command's --json document a forced exit writes (the
// interrupted error, with the command's schema); nil without --json.
func (ir *interrupts) expect(doc any) {
	if ir == nil {
		return
	}
	ir.mu.Lock()
	ir.doc = doc
	ir.mu.Unlock()
}

// settle marks the command's work done: run writes its result, which
// neither the notice nor a forced exit interrupts. It waits for a forced
// exit under way (which ends the process).
func (ir *interrupts) settle() {
	if ir == nil {
		return
	}
	ir.mu.Lock()
	ir.settled = true
	ir.mu.Unlock()
}

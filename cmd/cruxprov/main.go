// Command cruxprov governs third-party providers: it resolves, fetches,
// materializes, seals, verifies and runs them on pins an operator approved.
// See README.md and docs/ for the guides, and DESIGN §13 for the contract
// this command line keeps.
package main

import (
	"os"
	"runtime/debug"

	"github.com/cruxible/cruxprov/internal/interrupt"
)

// gcPercent is the collector's GOGC unless the environment sets one. What
// a command holds is small (a cold create of the bench's medium corpus
// peaks at ~30 MiB of heap at 400) and most of what it allocates dies at
// once; at Go's 100 that create collects 8–9 times for ~80 ms of CPU, which
// it takes from its compile processes, at 400 twice for ~20 ms
// (docs/seal.md, "Tricks"; GOGC=100 turns it off).
const gcPercent = 400

func main() {
	// SIGINT and SIGTERM are caught since the package inits
	// (internal/interrupt); the first cancels ctx, a second ends the
	// process at once (signals.go).
	ctx, ir := watchInterrupts(interrupt.Caught(), os.Stdout, os.Stderr, os.Exit)
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	os.Exit(run(ctx, os.Args, ir.stdout, ir.stderr))
}

// Command cruxprov governs third-party providers: it resolves, fetches,
// materializes, seals, verifies and runs them on pins an operator approved.
// See README.md and docs/ for the guides, and DESIGN §13 for the contract
// this command line keeps.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Package shim is the logic of cruxshim, the container entrypoint that turns a
// secret bundle delivered on a tmpfs/ramfs file or a one-shot pipe into an
// anonymous, sealed memory file on descriptor 3, then execs the command
// (DESIGN §11), or, as a container's pid 1, starts it and stays as its init.
// It also names that descriptor for executors: SecretChannel is the
// secret_channel spec both backends put in the protocol line. Given
// --protocol-fd-env, it moves the protocol channel off fd 1 just before
// the command starts (ProtocolFD).
//
// It owns the argv of cruxshim, the descriptor sweep, the path and pipe checks,
// the copy into the memory file, the exec or the init, and the closed set of shim
// refusal codes (docs/shim.md). It does not own the bundle's contents (the
// executor writes the JSON), the run's refusal codes (package refusal), or
// printing: Exec returns a *RefusedError and cmd/cruxshim writes its line.
//
// The package uses only the standard library and golang.org/x/sys (a test
// holds it to that), so the static binary stays small and auditable.
package shim

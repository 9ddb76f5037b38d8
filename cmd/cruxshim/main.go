// The runtime would otherwise keep its cgroup CPU files open for the process's
// life, on fd 3 when that is free; the shim needs fd 3 (and copes anyway).

//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command cruxshim is the container images' ENTRYPOINT (DESIGN §11): it moves
// a secret bundle from a tmpfs file or a pipe onto fd 3 and execs CMD (as a
// container's pid 1, starts it and stays as its init), or refuses with exit
// 78 and exactly one stderr line "shim_refused: <code>".
// The logic is package shim; this file only hands it argv and the
// environment and prints the refusal.
package main

import (
	"os"
	"syscall"

	"github.com/cruxible/cruxprov/shim"
)

func main() {
	err := shim.Exec(os.Args, os.Environ())
	// One write, so the line is never interleaved or split.
	_, _ = syscall.Write(2, []byte(err.Error()+"\n"))
	os.Exit(shim.ExitRefused)
}

// Package python holds the Python side of cruxprov, the
// cruxible_provider_runtime package (provider_api and the harness of DESIGN
// §10), and embeds its source so that Go code can build it into a wheel
// deterministically (internal/fixtures) and check an env for the harness.
//
// It does not build wheels (internal/fixtures does, with wheel/), run
// Python, or know about providers. The Python unit tests live in
// python/tests and run with `python3 -m unittest discover -s python/tests -t python`.
package python

import (
	"embed"
	"io/fs"
)

//go:embed cruxible_provider_runtime/*.py
var runtimeFS embed.FS

// Bootstrap is the program the executor gives the env's interpreter
// (python/bootstrap.py; Harness): it moves the protocol channel off fd 1
// and points fd 1 and sys.stdout at stderr, only then runs site.main(),
// which processes the env's .pth files and imports sitecustomize, and
// hands the channel to the harness (run_bootstrapped). Under -I -m the
// harness moved the channel as its first act, but site had run by then:
// a dependency's .pth file that printed, or wrote fd 1, wrote the result
// channel (DESIGN §10 says no provider code may). With a runtime whose
// harness predates run_bootstrapped (an env installed with an older
// runtime wheel) it gives fd 1 back and runs the harness as -m did, which
// moves the channel again: the .pth files have run by then, protected.
//
//go:embed bootstrap.py
var Bootstrap string

// Harness returns the argv that runs the harness under an env's
// interpreter py: py -I -S -c Bootstrap. -I: no PYTHON* variables, no
// user site-packages, no script directory or working directory on
// sys.path; -S: site is not imported at start, so no code of the env runs
// before Bootstrap's first line (site.main() then sets sys.prefix,
// sys.path and site-packages as a start without -S would). The local
// executor and image builds (an image's CMD) run this one argv.
func Harness(py string) []string { return []string{py, "-I", "-S", "-c", Bootstrap} }

const (
	// RuntimeDistribution is the runtime's distribution name as its wheel
	// spells it (PEP 503 normalized: cruxible-provider-runtime).
	RuntimeDistribution = "cruxible_provider_runtime"
	// RuntimeVersion is the runtime's version; __init__.py's __version__
	// says the same (a test holds them together).
	RuntimeVersion = "0.1.0"
	// HarnessModule is the harness's module: an env without it is refused
	// runtime_missing. The executor runs it through Bootstrap (Harness).
	HarnessModule = "cruxible_provider_runtime.harness"
)

// Runtime returns the runtime package's source files, rooted so that each
// path is what it is below site-packages (cruxible_provider_runtime/*.py).
func Runtime() fs.FS { return runtimeFS }

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

const (
	// RuntimeDistribution is the runtime's distribution name as its wheel
	// spells it (PEP 503 normalized: cruxible-provider-runtime).
	RuntimeDistribution = "cruxible_provider_runtime"
	// RuntimeVersion is the runtime's version; __init__.py's __version__
	// says the same (a test holds them together).
	RuntimeVersion = "0.1.0"
	// HarnessModule is what the executor runs: python -I -m HarnessModule.
	HarnessModule = "cruxible_provider_runtime.harness"
)

// Runtime returns the runtime package's source files, rooted so that each
// path is what it is below site-packages (cruxible_provider_runtime/*.py).
func Runtime() fs.FS { return runtimeFS }

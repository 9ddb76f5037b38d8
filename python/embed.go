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

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep503"
)

//go:embed cruxible_provider_runtime/*.py
var runtimeFS embed.FS

// Harness returns the argv that runs the harness under an env's
// interpreter py: py -I -m HarnessModule (DESIGN §10). -I: no PYTHON*
// variables, no user site-packages, no script or working directory on
// sys.path. The local executor, the container executor and image builds
// (an image's CMD) use this one argv, whatever the runtime's version; what
// the version decides (Handoff) is how the executor wires the protocol
// channel: on fd 1, or handed over on a descriptor ProtocolFDVar names.
func Harness(py string) []string { return []string{py, "-I", "-m", HarnessModule} }

// HarnessNoBytecode is Harness with -B, so that the interpreter writes no
// bytecode: the local executor's argv for an env made without it
// (--no-compile), whose modules are compiled in memory on every run. The
// env is read-only, but not to root: a run as root wrote __pycache__
// directories into the sealed env, and every later verify refused the
// env as drifted. (An image's env is the container's to write, in a layer
// the run discards: its CMD stays Harness.)
func HarnessNoBytecode(py string) []string {
	return []string{py, "-I", "-B", "-m", HarnessModule}
}

// Handoff reports whether a runtime at version runtime (the seal's
// resolution, an image's provenance) takes the protocol channel from the
// descriptor ProtocolFDVar names: HandoffVersion or later. The executor
// then starts the harness with fd 1 on stderr from the start, so that
// start-up code (a dependency's .pth file, sitecustomize), which runs
// before the harness's first line, cannot write the result. Before it, or
// when the version is not known (""), the channel is fd 1, as DESIGN §10
// has it.
func Handoff(runtime string) bool {
	v, err := pep440.Parse(runtime)
	return err == nil && pep440.Compare(v, pep440.MustParse(HandoffVersion)) >= 0
}

// IsRuntime reports whether a distribution name is the runtime's (PEP
// 503 normalized), as a resolution's packages name it.
func IsRuntime(name string) bool {
	return pep503.Normalize(name) == pep503.Normalize(RuntimeDistribution)
}

// RuntimeOf is the version of the runtime among a resolution's packages
// (a seal's), "" when it holds none: Handoff's runtime.
func RuntimeOf(pkgs []digest.ResolvedWheel) string {
	for _, p := range pkgs {
		if IsRuntime(p.Name) {
			return p.Version
		}
	}
	return ""
}

const (
	// RuntimeDistribution is the runtime's distribution name as its wheel
	// spells it (PEP 503 normalized: cruxible-provider-runtime).
	RuntimeDistribution = "cruxible_provider_runtime"
	// RuntimeVersion is the runtime's version; __init__.py's __version__
	// says the same (a test holds them together).
	RuntimeVersion = "0.2.0"
	// HandoffVersion is the first runtime version whose harness takes the
	// protocol channel from ProtocolFDVar (Handoff). An env installed with
	// an earlier runtime wheel gets the channel on fd 1.
	HandoffVersion = "0.2.0"
	// HarnessModule is the harness's module: an env without it is refused
	// runtime_missing. The executor runs it with Harness's argv.
	HarnessModule = "cruxible_provider_runtime.harness"
	// ProtocolFDVar is the variable through which the executor (or
	// cruxshim --protocol-fd-env, in a container) names the protocol
	// channel's descriptor to the harness, which removes it from its
	// environment and makes the descriptor non-inheritable before any
	// provider module is imported.
	ProtocolFDVar = "CRUXIBLE_PROTOCOL_FD"
)

// Runtime returns the runtime package's source files, rooted so that each
// path is what it is below site-packages (cruxible_provider_runtime/*.py).
func Runtime() fs.FS { return runtimeFS }

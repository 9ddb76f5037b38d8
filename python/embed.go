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

// Bootstrap is the program the executor gives the env's interpreter, run
// with -I -S (python/bootstrap.py; Harness): no code of the env runs in it.
// It duplicates fd 1, the protocol channel, to an inheritable descriptor,
// points fd 1 at stderr and execs (the same process) the argv it is given,
// py -I -m HarnessModule, with ProtocolFDVar naming that descriptor. site
// then runs the env's .pth files and sitecustomize (start-up code,
// provider code) while fd 1 is stderr, and the harness takes the channel
// from ProtocolFDVar, which it removes, making the descriptor
// non-inheritable. Under -I -m alone site ran before the harness's first
// line, with fd 1 the channel: a dependency's .pth file that printed wrote
// the result channel. The exec, not a site.main() in the bootstrap, is
// what keeps the provider's start the start -I -m gives (sys.argv,
// sys.flags, and so the flags multiprocessing passes its spawn and
// forkserver children). The one thing of its own start it undoes is
// CPython's locale coercion (PEP 538: LC_CTYPE=C.UTF-8 set in its
// environment in the C locale), which passed on would start the harness
// without UTF-8 mode: it gives LC_CTYPE=C back, and the exec'd interpreter
// coerces as a direct start does.
//
//go:embed bootstrap.py
var Bootstrap string

// Harness returns the argv that runs the harness under an env's
// interpreter py whose runtime is at version runtime (the seal's
// resolution, an image's provenance). From HandoffVersion on: py -I -S -c
// Bootstrap py -I -m HarnessModule. Before it, or when the version is not
// known (""), the harness cannot take the channel from Bootstrap: py -I -m
// HarnessModule (DESIGN §10's argv; start-up code then runs before the
// channel is off fd 1). -I: no PYTHON* variables, no user site-packages,
// no script or working directory on sys.path. The local executor, the
// container executor and image builds (an image's CMD) use this one argv.
func Harness(py, runtime string) []string {
	direct := []string{py, "-I", "-m", HarnessModule}
	if !Handoff(runtime) {
		return direct
	}
	return append([]string{py, "-I", "-S", "-c", Bootstrap}, direct...)
}

// Handoff reports whether a runtime at version runtime takes the protocol
// channel from Bootstrap (ProtocolFDVar): HandoffVersion or later.
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
// (a seal's), "" when it holds none: Harness's runtime.
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
	// protocol channel from Bootstrap (ProtocolFDVar). An env installed
	// with an earlier runtime wheel runs as python -I -m HarnessModule.
	HandoffVersion = "0.2.0"
	// HarnessModule is the harness's module: an env without it is refused
	// runtime_missing. The executor runs it with Harness's argv.
	HarnessModule = "cruxible_provider_runtime.harness"
	// ProtocolFDVar is the variable through which Bootstrap names the
	// protocol channel's descriptor to the harness, which removes it from
	// its environment before any provider code runs.
	ProtocolFDVar = "CRUXIBLE_PROTOCOL_FD"
)

// Runtime returns the runtime package's source files, rooted so that each
// path is what it is below site-packages (cruxible_provider_runtime/*.py).
func Runtime() fs.FS { return runtimeFS }

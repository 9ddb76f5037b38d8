// Package buildinfo owns the identity of this build of cruxprov: the tool
// version and commit (set at link time by the Makefile) and the protocol
// version spoken to provider harnesses (DESIGN §5, §10).
package buildinfo

import "runtime"

// Set with -ldflags "-X github.com/cruxible/cruxprov/internal/buildinfo.Version=…".
var (
	Version = "dev"
	Commit  = "unknown"
)

// ProtocolVersion is the transport envelope version cruxprov speaks (§5).
const ProtocolVersion = 1

// GoVersion is the Go release the binary was built with.
func GoVersion() string { return runtime.Version() }

// Tool returns "cruxprov/<version>", as seals and receipts record it.
func Tool() string { return "cruxprov/" + Version }

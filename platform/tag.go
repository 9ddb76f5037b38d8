// Package platform owns what a target machine is (DESIGN §4): PEP 425 wheel
// tags (with PEP 600 manylinux, PEP 656 musllinux, macOS and Windows
// platform tags), the ordered supported-tag list of a target, the named
// presets, the probe of a host interpreter, and a platform's canonical id
// and canonical JSON form.
//
// It does not read lock files or choose wheels (lockfile/ does), and it
// never runs Python except in the explicit host probe.
package platform

// Tag is one PEP 425 compatibility tag, e.g. cp312-abi3-manylinux_2_17_x86_64.
type Tag struct {
	Interpreter string
	ABI         string
	Platform    string
}

// String renders "interpreter-abi-platform".
func (t Tag) String() string { return t.Interpreter + "-" + t.ABI + "-" + t.Platform }

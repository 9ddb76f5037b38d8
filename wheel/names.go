package wheel

import (
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/refusal"
)

// checkMemberName refuses, as refusal.WheelUnsafePath, any archive member
// name that could land outside an installation target or be read two
// ways: invalid UTF-8, a NUL or other control character, a backslash, an
// absolute path, a drive letter, and an empty, "." or ".." segment. A
// trailing "/" marks a directory entry and is allowed once, at the end.
func checkMemberName(name string) error {
	unsafe := func(why string) error {
		return refusal.New(refusal.WheelUnsafePath, "member %q %s; do not install this wheel and report it to its author", name, why)
	}
	switch {
	case name == "":
		return unsafe("has an empty name")
	case !utf8.ValidString(name):
		return unsafe("is not valid UTF-8")
	case strings.ContainsRune(name, '\\'):
		return unsafe("contains a backslash")
	case strings.HasPrefix(name, "/"):
		return unsafe("is an absolute path")
	case len(name) >= 2 && name[1] == ':' && isASCIILetter(name[0]):
		return unsafe("starts with a drive letter")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return unsafe("contains a control character")
		}
	}
	trimmed := strings.TrimSuffix(name, "/")
	for seg := range strings.SplitSeq(trimmed, "/") {
		switch seg {
		case "":
			return unsafe("has an empty path segment")
		case ".", "..":
			return unsafe("has a '.' or '..' path segment")
		}
	}
	return nil
}

func isASCIILetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

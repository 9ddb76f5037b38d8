package wheel

import (
	"strings"
	"unicode"

	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/refusal"
)

// parseVersion parses a PEP 440 version as it appears in a file or
// directory name: pep440.Parse's spellings, but no whitespace anywhere
// (pep440.Parse trims surrounding whitespace; names become paths).
func parseVersion(s string) (pep440.Version, error) {
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return pep440.Version{}, refusal.New(refusal.WheelInvalid, "version %q contains whitespace", s)
	}
	v, err := pep440.Parse(s)
	if err != nil {
		return pep440.Version{}, refusal.Wrap(refusal.WheelInvalid, err, "version %q is not a valid PEP 440 version", s)
	}
	return v, nil
}

// checkVersion reports whether s is a valid PEP 440 version.
func checkVersion(s string) error {
	_, err := parseVersion(s)
	return err
}

// sameVersion reports whether a and b are valid and equal PEP 440
// versions ("1.0" equals "1.0.0" and "1.0.post0" does not).
func sameVersion(a, b string) bool {
	va, err1 := parseVersion(a)
	vb, err2 := parseVersion(b)
	return err1 == nil && err2 == nil && pep440.Compare(va, vb) == 0
}

package wheel

import (
	"regexp"

	"github.com/cruxible/cruxprov/refusal"
)

// TODO(pep440): switch to lockfile/pep440.Parse once it lands.
// pep440RE is the version pattern of PEP 440 Appendix B (case-insensitive,
// surrounding whitespace not allowed here: names become paths).
var pep440RE = regexp.MustCompile(`(?i)^v?(?:(?:[0-9]+)!)?(?:[0-9]+(?:\.[0-9]+)*)` +
	`(?:[-_.]?(?:alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?:[0-9]+)?)?` +
	`(?:(?:-(?:[0-9]+))|(?:[-_.]?(?:post|rev|r)[-_.]?(?:[0-9]+)?))?` +
	`(?:[-_.]?(?:dev)[-_.]?(?:[0-9]+)?)?` +
	`(?:\+(?:[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

// checkVersion reports whether s is a valid PEP 440 version.
func checkVersion(s string) error {
	if !pep440RE.MatchString(s) {
		return refusal.New(refusal.WheelInvalid, "version %q is not a valid PEP 440 version", s)
	}
	return nil
}

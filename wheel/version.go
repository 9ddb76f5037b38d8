package wheel

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/cruxible/cruxprov/refusal"
)

// pep440RE is the version pattern of PEP 440 Appendix B, anchored and
// case-insensitive (no surrounding whitespace: names become paths).
// TODO(pep440): use lockfile/pep440.Parse once it lands.
var pep440RE = regexp.MustCompile(`(?i)^v?(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*)` +
	`(?:[-_.]?(alpha|a|beta|b|preview|pre|c|rc)[-_.]?([0-9]+)?)?` +
	`(?:(?:-([0-9]+))|(?:[-_.]?(post|rev|r)[-_.]?([0-9]+)?))?` +
	`(?:[-_.]?(dev)[-_.]?([0-9]+)?)?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

// checkVersion reports whether s is a valid PEP 440 version.
func checkVersion(s string) error {
	if !pep440RE.MatchString(s) {
		return refusal.New(refusal.WheelInvalid, "version %q is not a valid PEP 440 version", s)
	}
	return nil
}

// versionKey returns a string equal for two versions exactly when PEP 440
// calls them equal: the normalized form with the release's trailing zeros
// dropped ("1.0" and "1" are equal). ok is false for an invalid version.
func versionKey(s string) (key string, ok bool) {
	m := pep440RE.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	num := func(x string) string {
		x = strings.TrimLeft(x, "0")
		if x == "" {
			return "0"
		}
		return x
	}
	var b strings.Builder
	b.WriteString(num(m[1]) + "!")
	rel := strings.Split(m[2], ".")
	for len(rel) > 1 && num(rel[len(rel)-1]) == "0" {
		rel = rel[:len(rel)-1]
	}
	for i, r := range rel {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(num(r))
	}
	if m[3] != "" {
		pre := map[string]string{"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc", "rc": "rc"}[strings.ToLower(m[3])]
		b.WriteString(pre + num(m[4]))
	}
	switch {
	case m[5] != "":
		b.WriteString(".post" + num(m[5]))
	case m[6] != "":
		b.WriteString(".post" + num(m[7]))
	}
	if m[8] != "" {
		b.WriteString(".dev" + num(m[9]))
	}
	if m[10] != "" {
		local := strings.NewReplacer("-", ".", "_", ".").Replace(strings.ToLower(m[10]))
		var parts []string
		for p := range strings.SplitSeq(local, ".") {
			if _, err := strconv.ParseUint(p, 10, 64); err == nil {
				p = num(p)
			}
			parts = append(parts, p)
		}
		b.WriteString("+" + strings.Join(parts, "."))
	}
	return b.String(), true
}

// sameVersion reports whether a and b are valid and equal PEP 440 versions.
func sameVersion(a, b string) bool {
	ka, ok1 := versionKey(a)
	kb, ok2 := versionKey(b)
	return ok1 && ok2 && ka == kb
}

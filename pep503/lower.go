package pep503

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyLower is Python's str.lower(): Unicode full lower-case mapping,
// including U+0130 and the final-sigma rule.
func pyLower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch r {
		case 0x130: // LATIN CAPITAL LETTER I WITH DOT ABOVE
			b.WriteString("i\u0307")
			continue
		case 0x3a3: // GREEK CAPITAL LETTER SIGMA
			if finalSigma(rs, i) {
				b.WriteRune(0x3c2)
				continue
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// finalSigma approximates Unicode's Final_Sigma condition: a cased letter
// before (skipping case-ignorable marks) and none after.
func finalSigma(rs []rune, i int) bool {
	before := false
	for j := i - 1; j >= 0; j-- {
		if caseIgnorable(rs[j]) {
			continue
		}
		before = cased(rs[j])
		break
	}
	if !before {
		return false
	}
	for j := i + 1; j < len(rs); j++ {
		if caseIgnorable(rs[j]) {
			continue
		}
		return !cased(rs[j])
	}
	return true
}

func cased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

func caseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || r == '\'' || r == '.' || r == ':' || r == 0xb7 || r == 0x2019
}

package pep440

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pep440Regex is the canonical pattern of PEP 440 Appendix B, anchored,
// case-insensitive: an independent statement of what Parse accepts.
var pep440Regex = regexp.MustCompile(`(?i)^v?(?:(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)` +
	`(?P<pre>[-_\.]?(?P<pre_l>(a|b|c|rc|alpha|beta|pre|preview))[-_\.]?(?P<pre_n>[0-9]+)?)?` +
	`(?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_\.]?(?P<post_l>post|rev|r)[-_\.]?(?P<post_n2>[0-9]+)?))?` +
	`(?P<dev>[-_\.]?(?P<dev_l>dev)[-_\.]?(?P<dev_n>[0-9]+)?)?)` +
	`(?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?$`)

// regexNormalize normalizes s through the regex's groups, the way PEP 440
// describes; ok is false when the regex does not match.
func regexNormalize(s string) (string, bool) {
	m := pep440Regex.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	g := func(name string) string { return m[pep440Regex.SubexpIndex(name)] }
	num := func(x string) string {
		if x == "" {
			return "0"
		}
		n, err := strconv.Atoi(x)
		if err != nil {
			return "overflow"
		}
		return strconv.Itoa(n)
	}
	var b strings.Builder
	if e := g("epoch"); e != "" && num(e) != "0" {
		b.WriteString(num(e) + "!")
	}
	for i, r := range strings.Split(g("release"), ".") {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(num(r))
	}
	if l := strings.ToLower(g("pre_l")); l != "" {
		switch l {
		case "alpha":
			l = "a"
		case "beta":
			l = "b"
		case "c", "pre", "preview":
			l = "rc"
		}
		b.WriteString(l + num(g("pre_n")))
	}
	if g("post") != "" {
		b.WriteString(".post" + num(g("post_n1")+g("post_n2")))
	}
	if g("dev") != "" {
		b.WriteString(".dev" + num(g("dev_n")))
	}
	if l := g("local"); l != "" {
		parts := strings.FieldsFunc(strings.ToLower(l), func(r rune) bool { return r == '.' || r == '-' || r == '_' })
		for i, p := range parts {
			if allDigits(p) {
				parts[i] = strings.TrimLeft(p, "0")
				if parts[i] == "" {
					parts[i] = "0"
				}
			}
		}
		b.WriteString("+" + strings.Join(parts, "."))
	}
	return b.String(), true
}

// checkAgainstRegex fails when Parse and the PEP 440 regex disagree on s.
func checkAgainstRegex(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] <= ' ' {
			return // whitespace and non-ASCII are the vectors' business
		}
	}
	want, ok := regexNormalize(s)
	if strings.Contains(want, "overflow") {
		return
	}
	v, err := Parse(s)
	switch {
	case ok && err != nil:
		if pe := err.(*ParseError); strings.Contains(pe.Reason, "too large") {
			return
		}
		t.Errorf("%q: regex accepts (%s), Parse refuses: %v", s, want, err)
	case !ok && err == nil:
		t.Errorf("%q: regex refuses, Parse accepts as %s", s, v)
	case ok && v.String() != want:
		t.Errorf("%q: Parse gives %s, regex %s", s, v, want)
	}
}

func TestParseMatchesPEP440Regex(t *testing.T) {
	atoms := []string{"1", "0", "2", "10", "007", ".", "-", "_", "!", "+", "v", "V", "a", "b", "c", "rc", "RC",
		"alpha", "beta", "pre", "preview", "post", "rev", "r", "dev", "DEV", "x", "abc", "*", "1.0", "1!"}
	rng := rand.New(rand.NewPCG(440, 508))
	n := 100000
	if testing.Short() {
		n = 20000
	}
	for range n {
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteString("1.0")
		}
		for k := rng.IntN(6); k >= 0; k-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		checkAgainstRegex(t, b.String())
		if t.Failed() {
			return
		}
	}
}

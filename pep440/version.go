package pep440

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseError reports a version or specifier that does not parse.
type ParseError struct {
	Input  string // the text as given
	Reason string // what is wrong, e.g. "invalid version: unexpected text at offset 3"
}

// Error renders `pep440: <reason>: "<input>"`.
func (e *ParseError) Error() string {
	return "pep440: " + e.Reason + ": " + strconv.Quote(e.Input)
}

// Pre-release kinds, in ascending order.
const (
	preNone uint8 = iota
	preA
	preB
	preRC
)

var preLetters = [...]string{"", "a", "b", "rc"}

// Version is a parsed PEP 440 version. The zero value is version "0".
// Versions are immutable; order them with Compare (Equal is Compare == 0:
// "1.0" equals "1.0.0", and "1.0+01" equals "1.0+1").
type Version struct {
	release []int64 // never modified after Parse
	local   string  // normalized local label ("" when absent)
	epoch   int64   // numbers are int64 on every GOARCH (an int is 32 bits on 386)
	preN    int64
	post    int64
	dev     int64
	pre     uint8 // preNone, preA, preB, preRC
	hasPost bool
	hasDev  bool
}

// MustParse is Parse that panics on error; for constants in code and tests.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// isPySpace reports whether r is whitespace as Python's str.isspace (and
// the re module's \s for str patterns) defines it.
func isPySpace(r rune) bool {
	if r < utf8.RuneSelf {
		switch r {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f:
			return true
		}
		return false
	}
	return unicode.IsSpace(r)
}

// trimPySpace trims Python whitespace from both ends of s.
func trimPySpace(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSep(c byte) bool { return c == '.' || c == '_' || c == '-' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// hasPrefixFold reports whether s[i:] starts with word (lower-case ASCII),
// ignoring ASCII case.
func hasPrefixFold(s string, i int, word string) bool {
	if len(s)-i < len(word) {
		return false
	}
	for k := 0; k < len(word); k++ {
		c := s[i+k]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[k] {
			return false
		}
	}
	return true
}

// scanDigits returns the end of the run of ASCII digits starting at i.
func scanDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// maxNumber bounds every number of a version, one below the int64
// maximum so that the bounds specifiers derive (N+1) cannot overflow.
const maxNumber = math.MaxInt64 - 1

// atoi parses s[i:j] (all digits, non-empty); ok is false above maxNumber.
func atoi(s string, i, j int) (int64, bool) {
	var n int64
	for k := i; k < j; k++ {
		d := int64(s[k] - '0')
		if n > (maxNumber-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Parse parses a PEP 440 version, accepting every spelling pypa/packaging
// accepts (leading "v", case-insensitive letters, alternate spellings and
// separators, implicit numbers, surrounding whitespace) and normalizing it.
// Numbers of 2^63-1 or more are refused (pypa/packaging has no bound).
func Parse(s string) (Version, error) {
	v, reason := parse(s)
	if reason != "" {
		return Version{}, &ParseError{Input: s, Reason: "invalid version: " + reason}
	}
	return v, nil
}

// parse returns the version or a non-empty reason.
func parse(in string) (Version, string) {
	s := trimPySpace(in)
	var v Version
	i := 0
	if i < len(s) && (s[i] == 'v' || s[i] == 'V') {
		i++
	}
	// Epoch: digits followed by "!".
	if j := scanDigits(s, i); j > i && j < len(s) && s[j] == '!' {
		n, ok := atoi(s, i, j)
		if !ok {
			return v, "number too large"
		}
		v.epoch = n
		i = j + 1
	}
	// Release: N(.N)*
	j := scanDigits(s, i)
	if j == i {
		return v, "expected a release number at offset " + strconv.Itoa(i)
	}
	count := 1
	for k := j; k+1 < len(s) && s[k] == '.' && isDigit(s[k+1]); {
		count++
		k = scanDigits(s, k+1)
	}
	v.release = make([]int64, 0, count)
	for {
		n, ok := atoi(s, i, j)
		if !ok {
			return v, "number too large"
		}
		v.release = append(v.release, n)
		i = j
		if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
			i++
			j = scanDigits(s, i)
			continue
		}
		break
	}
	// Pre-release: [._-]? (alpha|a|beta|b|preview|pre|c|rc) [._-]? N?
	{
		k := i
		if k < len(s) && isSep(s[k]) {
			k++
		}
		kind, w := preWord(s, k)
		if kind != preNone {
			n, e, ok := optNumber(s, k+w)
			if !ok {
				return v, "number too large"
			}
			v.pre, v.preN = kind, n
			i = e
		}
	}
	// Post-release: -N | [._-]? (post|rev|r) [._-]? N?
	if i+1 < len(s) && s[i] == '-' && isDigit(s[i+1]) {
		e := scanDigits(s, i+1)
		n, ok := atoi(s, i+1, e)
		if !ok {
			return v, "number too large"
		}
		v.post, v.hasPost = n, true
		i = e
	} else {
		k := i
		if k < len(s) && isSep(s[k]) {
			k++
		}
		w := 0
		switch {
		case hasPrefixFold(s, k, "post"):
			w = 4
		case hasPrefixFold(s, k, "rev"):
			w = 3
		case hasPrefixFold(s, k, "r"):
			w = 1
		}
		if w > 0 {
			n, e, ok := optNumber(s, k+w)
			if !ok {
				return v, "number too large"
			}
			v.post, v.hasPost = n, true
			i = e
		}
	}
	// Development release: [._-]? dev [._-]? N?
	{
		k := i
		if k < len(s) && isSep(s[k]) {
			k++
		}
		if hasPrefixFold(s, k, "dev") {
			n, e, ok := optNumber(s, k+3)
			if !ok {
				return v, "number too large"
			}
			v.dev, v.hasDev = n, true
			i = e
		}
	}
	// Local label: + [a-z0-9]+ ([._-][a-z0-9]+)*
	if i < len(s) && s[i] == '+' {
		start := i + 1
		k := start
		for k < len(s) && isAlnum(s[k]) {
			k++
		}
		if k == start {
			return v, "empty local version label"
		}
		for k+1 < len(s) && isSep(s[k]) && isAlnum(s[k+1]) {
			k++
			for k < len(s) && isAlnum(s[k]) {
				k++
			}
		}
		v.local = normalizeLocal(s[start:k])
		i = k
	}
	if i != len(s) {
		return v, "unexpected text at offset " + strconv.Itoa(i)
	}
	return v, ""
}

// preWord matches a pre-release spelling at s[i:], in pypa/packaging's
// alternation order, returning its kind and width.
func preWord(s string, i int) (uint8, int) {
	switch {
	case hasPrefixFold(s, i, "alpha"):
		return preA, 5
	case hasPrefixFold(s, i, "a"):
		return preA, 1
	case hasPrefixFold(s, i, "beta"):
		return preB, 4
	case hasPrefixFold(s, i, "b"):
		return preB, 1
	case hasPrefixFold(s, i, "preview"):
		return preRC, 7
	case hasPrefixFold(s, i, "pre"):
		return preRC, 3
	case hasPrefixFold(s, i, "c"):
		return preRC, 1
	case hasPrefixFold(s, i, "rc"):
		return preRC, 2
	}
	return preNone, 0
}

// normalizeLocal lower-cases a local label, joins its parts with "." and
// writes numeric parts without leading zeros.
func normalizeLocal(l string) string {
	var b strings.Builder
	b.Grow(len(l))
	start := 0
	for k := 0; k <= len(l); k++ {
		if k < len(l) && !isSep(l[k]) {
			continue
		}
		part := l[start:k]
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if allDigits(part) {
			z := 0
			for z < len(part)-1 && part[z] == '0' {
				z++
			}
			b.WriteString(part[z:])
		} else {
			for x := 0; x < len(part); x++ {
				c := part[x]
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				b.WriteByte(c)
			}
		}
		start = k + 1
	}
	return b.String()
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// String returns the normalized form, e.g. "1!2.0rc1.post2.dev3+abc.4".
func (v Version) String() string {
	b := make([]byte, 0, 24)
	b = v.appendPublic(b)
	if v.local != "" {
		b = append(b, '+')
		b = append(b, v.local...)
	}
	return string(b)
}

func (v Version) appendBase(b []byte) []byte {
	if v.epoch != 0 {
		b = strconv.AppendInt(b, int64(v.epoch), 10)
		b = append(b, '!')
	}
	if len(v.release) == 0 {
		return append(b, '0')
	}
	for i, n := range v.release {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return b
}

func (v Version) appendPublic(b []byte) []byte {
	b = v.appendBase(b)
	if v.pre != preNone {
		b = append(b, preLetters[v.pre]...)
		b = strconv.AppendInt(b, int64(v.preN), 10)
	}
	if v.hasPost {
		b = append(b, ".post"...)
		b = strconv.AppendInt(b, int64(v.post), 10)
	}
	if v.hasDev {
		b = append(b, ".dev"...)
		b = strconv.AppendInt(b, int64(v.dev), 10)
	}
	return b
}

// Epoch returns the epoch (0 when absent).
func (v Version) Epoch() int64 { return v.epoch }

// Release returns a copy of the release segment, trailing zeros included.
func (v Version) Release() []int64 {
	if len(v.release) == 0 {
		return []int64{0}
	}
	return append([]int64(nil), v.release...)
}

// Pre returns the pre-release letter ("a", "b" or "rc") and number, and
// whether there is one.
func (v Version) Pre() (letter string, n int64, ok bool) {
	return preLetters[v.pre], v.preN, v.pre != preNone
}

// Post returns the post-release number and whether there is one.
func (v Version) Post() (int64, bool) { return v.post, v.hasPost }

// Dev returns the development-release number and whether there is one.
func (v Version) Dev() (int64, bool) { return v.dev, v.hasDev }

// Local returns the normalized local label ("" when there is none).
func (v Version) Local() string { return v.local }

// Public returns the version without its local label.
func (v Version) Public() Version {
	v.local = ""
	return v
}

// BaseVersion returns the epoch and release only, e.g. "1!2.0" for
// "1!2.0rc1.post2+abc".
func (v Version) BaseVersion() string { return string(v.appendBase(nil)) }

// IsPrerelease reports a pre-release or development release (1.0a1,
// 1.0.dev0, 1.0.post1.dev2).
func (v Version) IsPrerelease() bool { return v.pre != preNone || v.hasDev }

// IsPostrelease reports a post-release segment.
func (v Version) IsPostrelease() bool { return v.hasPost }

// IsDevrelease reports a development-release segment.
func (v Version) IsDevrelease() bool { return v.hasDev }

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Compare orders a and b as PEP 440 does: -1 if a < b, 0 if equal, +1 if
// a > b. It does not allocate.
func Compare(a, b Version) int { return compare(&a, &b) }

func compare(a, b *Version) int {
	if a.epoch != b.epoch {
		return cmpInt(a.epoch, b.epoch)
	}
	if c := cmpRelease(a, b); c != 0 {
		return c
	}
	return cmpSuffix(a, b)
}

func cmpRelease(a, b *Version) int {
	ra, rb := a.release, b.release
	m := len(ra)
	if len(rb) < m {
		m = len(rb)
	}
	for i := 0; i < m; i++ {
		if ra[i] != rb[i] {
			return cmpInt(ra[i], rb[i])
		}
	}
	for _, x := range ra[m:] {
		if x != 0 {
			return 1
		}
	}
	for _, x := range rb[m:] {
		if x != 0 {
			return -1
		}
	}
	return 0
}

// preRank gives the pre segment's sort class: a dev-only release sorts
// before every pre-release, a release without pre-release after them.
func (v *Version) preRank() int {
	switch {
	case v.pre != preNone:
		return 1
	case !v.hasPost && v.hasDev:
		return 0
	}
	return 2
}

// cmpSuffix compares everything after the release segment.
func cmpSuffix(a, b *Version) int {
	if c := cmpPrePostDev(a, b); c != 0 {
		return c
	}
	return cmpLocal(a.local, b.local)
}

// cmpPrePostDev compares the pre, post and dev segments.
func cmpPrePostDev(a, b *Version) int {
	ra, rb := a.preRank(), b.preRank()
	if c := cmpInt(ra, rb); c != 0 {
		return c
	}
	if ra == 1 {
		if c := cmpInt(int(a.pre), int(b.pre)); c != 0 {
			return c
		}
		if c := cmpInt(a.preN, b.preN); c != 0 {
			return c
		}
	}
	if a.hasPost != b.hasPost {
		if a.hasPost {
			return 1
		}
		return -1
	}
	if c := cmpInt(a.post, b.post); a.hasPost && c != 0 {
		return c
	}
	if a.hasDev != b.hasDev {
		if a.hasDev {
			return -1
		}
		return 1
	}
	if a.hasDev {
		return cmpInt(a.dev, b.dev)
	}
	return 0
}

// cmpLocal orders normalized local labels: none < any; part by part,
// alphanumeric parts before numeric ones, numbers numerically, strings
// lexically, a prefix before its extensions.
func cmpLocal(a, b string) int {
	if a == "" || b == "" {
		switch {
		case a == b:
			return 0
		case a == "":
			return -1
		}
		return 1
	}
	for {
		pa, ra, moreA := cutDot(a)
		pb, rb, moreB := cutDot(b)
		na, nb := allDigits(pa), allDigits(pb)
		var c int
		switch {
		case na && nb:
			if c = cmpInt(len(pa), len(pb)); c == 0 {
				c = strings.Compare(pa, pb)
			}
		case na:
			c = 1
		case nb:
			c = -1
		default:
			c = strings.Compare(pa, pb)
		}
		if c != 0 {
			return c
		}
		switch {
		case !moreA && !moreB:
			return 0
		case !moreA:
			return -1
		case !moreB:
			return 1
		}
		a, b = ra, rb
	}
}

func cutDot(s string) (part, rest string, more bool) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// Equal reports Compare(v, w) == 0.
func (v Version) Equal(w Version) bool { return Compare(v, w) == 0 }

// trimmedLen is the release length without trailing zeros (at least 1).
func (v *Version) trimmedLen() int {
	n := len(v.release)
	for n > 1 && v.release[n-1] == 0 {
		n--
	}
	return n
}

// canonical returns the form pypa/packaging's canonicalize_version gives:
// the normalized string, with trailing release zeros removed when trim.
func (v Version) canonical(trim bool) string {
	if trim && len(v.release) > 0 {
		v.release = v.release[:v.trimmedLen()]
	}
	return v.String()
}

// optNumber reads the "[._-]? N?" that ends every pre, post and dev segment,
// starting at k: the number (0 when absent), where the segment ends, and
// false when the number is too large.
func optNumber(s string, k int) (n int64, end int, ok bool) {
	if k < len(s) && isSep(s[k]) {
		k++
	}
	e := scanDigits(s, k)
	if e == k {
		return 0, e, true
	}
	n, ok = atoi(s, k, e)
	return n, e, ok
}

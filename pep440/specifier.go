package pep440

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Prereleases is a pre-release policy, pypa/packaging's tri-state
// `prereleases` argument.
type Prereleases int8

const (
	// PrereleasesDefault is packaging's None: use the specifier's own
	// setting, else allow pre-releases when a specifier mentions one. For a
	// single version (Match) this accepts a pre-release that is in range;
	// Filter applies PEP 440's rule (pre-releases only when no final
	// release matches).
	PrereleasesDefault Prereleases = iota
	// PrereleasesAllow accepts pre-releases that are in range.
	PrereleasesAllow
	// PrereleasesExclude refuses every pre-release.
	PrereleasesExclude
)

// Specifier is one PEP 440 version clause such as ">=1.0" or "==1.2.*".
// It is an immutable handle (cheap to copy); the zero Specifier matches
// nothing and prints as "".
type Specifier struct {
	d *specData
}

type specData struct {
	op       string  // "~=", "==", "!=", "<=", ">=", "<", ">", "==="
	opc      uint8   // op as a code (opGE, ...)
	ver      string  // version text as written, surrounding space removed
	verLower string  // for ===: ver lower-cased
	v        Version // the version (the prefix for a wildcard)
	bound    Version // <: exclusive upper; > (dev/post): inclusive lower; ~= and wildcard: exclusive upper
	lo       Version // wildcard: inclusive lower
	vOK      bool    // ver parses (always, except for ===)
	wildcard bool
	hasLocal bool
	pre      Prereleases
}

// ParseSpecifier parses one clause, e.g. ">= 1.0", "~=2.2", "!=1.3.*",
// "===foobar".
func ParseSpecifier(s string) (Specifier, error) {
	sp, reason := parseSpecifier(s)
	if reason != "" {
		return Specifier{}, &ParseError{Input: s, Reason: "invalid specifier: " + reason}
	}
	return Specifier{&sp}, nil
}

func hasPySpace(s string) bool {
	for _, r := range s {
		if isPySpace(r) {
			return true
		}
	}
	return false
}

func parseSpecifier(in string) (specData, string) {
	var sp specData
	t := trimPySpace(in)
	switch {
	case strings.HasPrefix(t, "==="):
		sp.op = "==="
	case len(t) >= 2 && (t[:2] == "~=" || t[:2] == "==" || t[:2] == "!=" || t[:2] == "<=" || t[:2] == ">="):
		sp.op = t[:2]
	case len(t) >= 1 && (t[0] == '<' || t[0] == '>'):
		sp.op = t[:1]
	default:
		return sp, "expected an operator (~=, ==, !=, <=, >=, <, >, ===)"
	}
	sp.opc = opCode(sp.op)
	sp.ver = trimPySpace(t[len(sp.op):])
	if sp.op == "===" {
		if hasPySpace(sp.ver) || strings.ContainsAny(sp.ver, ";)") {
			return sp, "=== takes one word without spaces, ';' or ')'"
		}
		sp.verLower = strings.ToLower(sp.ver)
		if v, reason := parse(sp.ver); reason == "" {
			sp.v, sp.vOK = v, true
		}
		return sp, ""
	}
	if (sp.op == "==" || sp.op == "!=") && strings.HasSuffix(sp.ver, ".*") {
		base := sp.ver[:len(sp.ver)-2]
		if !plainRelease(base) {
			return sp, ".* may only follow a release segment"
		}
		v, reason := parse(base)
		if reason != "" {
			return sp, reason
		}
		sp.v, sp.vOK, sp.wildcard = v, true, true
		sp.lo = Version{epoch: v.epoch, release: v.release, dev: 0, hasDev: true}
		sp.bound = nextPrefix(v, len(v.release))
		return sp, ""
	}
	v, reason := parse(sp.ver)
	if reason != "" {
		return sp, reason
	}
	if hasPySpace(sp.ver) {
		return sp, "space inside the version"
	}
	sp.v, sp.vOK = v, true
	sp.hasLocal = v.local != ""
	switch sp.op {
	case "==", "!=":
	case "~=":
		if sp.hasLocal {
			return sp, "~= does not take a local version"
		}
		if len(v.release) < 2 {
			return sp, "~= needs at least two release numbers"
		}
		sp.bound = nextPrefix(v, len(v.release)-1)
	default:
		if sp.hasLocal {
			return sp, sp.op + " does not take a local version"
		}
	}
	switch sp.op {
	case "<":
		if v.IsPrerelease() {
			sp.bound = v
		} else {
			sp.bound = v
			sp.bound.dev, sp.bound.hasDev, sp.bound.local = 0, true, ""
		}
	case ">":
		switch {
		case v.hasDev:
			sp.bound = v
			sp.bound.dev++
			sp.bound.local = ""
		case v.hasPost:
			sp.bound = v
			sp.bound.post++
			sp.bound.dev, sp.bound.hasDev, sp.bound.local = 0, true, ""
		}
	}
	return sp, ""
}

// Operator codes, for a switch without string compares.
const (
	opGE uint8 = iota
	opLE
	opEQ
	opNE
	opLT
	opGT
	opCompatible
	opArbitrary
)

func opCode(op string) uint8 {
	switch op {
	case ">=":
		return opGE
	case "<=":
		return opLE
	case "==":
		return opEQ
	case "!=":
		return opNE
	case "<":
		return opLT
	case ">":
		return opGT
	case "~=":
		return opCompatible
	}
	return opArbitrary
}

// plainRelease reports whether s is [v]? (N!)? N(.N)* — what may precede ".*".
func plainRelease(s string) bool {
	i := 0
	if i < len(s) && (s[i] == 'v' || s[i] == 'V') {
		i++
	}
	if j := scanDigits(s, i); j > i && j < len(s) && s[j] == '!' {
		i = j + 1
	}
	for {
		j := scanDigits(s, i)
		if j == i {
			return false
		}
		if j == len(s) {
			return true
		}
		if s[j] != '.' {
			return false
		}
		i = j + 1
	}
}

// nextPrefix returns the .dev0 of the release after v's first n release
// numbers: nextPrefix(1.4.5, 2) is 1.5.dev0.
func nextPrefix(v Version, n int) Version {
	rel := make([]int64, n)
	copy(rel, v.release[:n])
	rel[n-1]++
	return Version{epoch: v.epoch, release: rel, hasDev: true}
}

// String returns the operator and the version as written, e.g. "<2" for "< 2".
func (s Specifier) String() string {
	if s.d == nil {
		return ""
	}
	return s.d.op + s.d.ver
}

// Operator returns the operator, e.g. ">=".
func (s Specifier) Operator() string {
	if s.d == nil {
		return ""
	}
	return s.d.op
}

// Version returns the version text as written (with ".*" for a wildcard).
func (s Specifier) Version() string {
	if s.d == nil {
		return ""
	}
	return s.d.ver
}

// WithPrereleases returns s with an explicit pre-release policy, as
// pypa/packaging's Specifier(..., prereleases=...).
func (s Specifier) WithPrereleases(p Prereleases) Specifier {
	if s.d == nil {
		return s
	}
	d := *s.d
	d.pre = p
	return Specifier{&d}
}

// MentionsPrerelease reports whether the clause itself implies that
// pre-releases are wanted (">=1.0.dev1" does; "!=1.0a1" and "==1.0.*" never do).
func (s Specifier) MentionsPrerelease() bool {
	return s.d != nil && s.d.mentionsPrerelease()
}

func (s *specData) mentionsPrerelease() bool {
	switch {
	case s.op == "!=":
		return false
	case s.op == "==" && s.wildcard:
		return false
	case !s.vOK:
		return false
	}
	return s.v.IsPrerelease()
}

// prereleasesProp is packaging's Specifier.prereleases property.
func (s *specData) prereleasesProp() Prereleases {
	if s.pre != PrereleasesDefault {
		return s.pre
	}
	if s.mentionsPrerelease() {
		return PrereleasesAllow
	}
	return PrereleasesDefault
}

// cmpPublic compares a and b ignoring local labels.
func cmpPublic(a, b *Version) int {
	if c := cmpInt(a.epoch, b.epoch); c != 0 {
		return c
	}
	if c := cmpRelease(a, b); c != 0 {
		return c
	}
	return cmpPrePostDev(a, b)
}

// inPostFamily reports whether v is s.v itself, a local variant of it, or
// one of its post-releases (what ">V" excludes).
func (s *specData) inPostFamily(v *Version) bool {
	if v.epoch != s.v.epoch || cmpRelease(v, &s.v) != 0 || v.pre != s.v.pre || (v.pre != preNone && v.preN != s.v.preN) {
		return false
	}
	return !v.hasDev || v.hasPost
}

// matchVersion reports whether v is in the clause's range, ignoring the
// pre-release policy. raw is the text to compare for ===.
func (s *specData) matchVersion(v *Version, raw string) bool {
	switch s.opc {
	case opGE:
		return compare(v, &s.v) >= 0
	case opLE:
		return cmpPublic(v, &s.v) <= 0
	case opEQ:
		return s.matchEqual(v)
	case opNE:
		return !s.matchEqual(v)
	case opLT:
		return compare(v, &s.bound) < 0
	case opGT:
		if s.v.hasDev || s.v.hasPost {
			return compare(v, &s.bound) >= 0
		}
		return compare(v, &s.v) > 0 && !s.inPostFamily(v)
	case opCompatible:
		return compare(v, &s.v) >= 0 && compare(v, &s.bound) < 0
	}
	return lowerEqual(raw, s.verLower)
}

func (s *specData) matchEqual(v *Version) bool {
	switch {
	case s.wildcard:
		return compare(v, &s.lo) >= 0 && compare(v, &s.bound) < 0
	case s.hasLocal:
		return compare(v, &s.v) == 0
	}
	return cmpPublic(v, &s.v) == 0
}

// lowerEqual reports strings.ToLower(a) == lower without allocating for
// ASCII input.
func lowerEqual(a, lower string) bool {
	if len(a) != len(lower) {
		for i := 0; i < len(a); i++ {
			if a[i] >= utf8.RuneSelf {
				return strings.ToLower(a) == lower
			}
		}
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c >= utf8.RuneSelf {
			return strings.ToLower(a) == lower
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Contains reports whether v satisfies the clause; prereleases false
// refuses every pre-release.
func (s Specifier) Contains(v Version, prereleases bool) bool {
	if s.d == nil || (!prereleases && v.IsPrerelease()) {
		return false
	}
	return s.d.contains(&v)
}

// contains matches a version with pre-releases allowed.
func (s *specData) contains(v *Version) bool {
	raw := ""
	if s.op == "===" {
		raw = v.String()
	}
	return s.matchVersion(v, raw)
}

// resolve turns a call's policy into the effective one, as packaging does.
func resolve(p, own Prereleases) Prereleases {
	if p != PrereleasesDefault {
		return p
	}
	return own
}

// Match is pypa/packaging's Specifier.contains(item, prereleases=p): item
// is any string (=== compares it case-insensitively as written; other
// operators never match a string that is not a version).
func (s Specifier) Match(item string, p Prereleases) bool {
	return s.d != nil && s.d.match(item, p)
}

func (s *specData) match(item string, p Prereleases) bool {
	eff := resolve(p, s.prereleasesProp())
	if s.op == "===" {
		// No parse unless the policy needs it: the marker evaluator calls
		// this on every evaluation of an === clause.
		if !lowerEqual(item, s.verLower) {
			return false
		}
		if eff != PrereleasesExclude {
			return true
		}
	}
	v, reason := parse(item)
	parsed := reason == ""
	if s.op != "===" && !parsed {
		return false
	}
	if !s.matchVersion(&v, item) {
		return false
	}
	return !(eff == PrereleasesExclude && parsed && v.IsPrerelease())
}

// Filter is pypa/packaging's Specifier.filter(items, prereleases=p): the
// matching items in order; with the default policy, pre-releases only when
// no final release matches.
func (s Specifier) Filter(items []string, p Prereleases) []string {
	if s.d == nil {
		return nil
	}
	return s.d.filter(items, p)
}

func (s *specData) filter(items []string, p Prereleases) []string {
	eff := resolve(p, s.prereleasesProp())
	if s.op == "===" {
		var m []string
		for _, it := range items {
			if lowerEqual(it, s.verLower) {
				m = append(m, it)
			}
		}
		return applyPrereleases(m, eff)
	}
	return filterParsed(items, eff, func(v *Version, raw string) bool { return s.matchVersion(v, raw) })
}

// applyPrereleases filters already-matched items by policy; strings that
// are not versions always pass.
func applyPrereleases(items []string, eff Prereleases) []string {
	switch eff {
	case PrereleasesAllow:
		return items
	case PrereleasesExclude:
		var out []string
		for _, it := range items {
			if v, reason := parse(it); reason == "" && v.IsPrerelease() {
				continue
			}
			out = append(out, it)
		}
		return out
	}
	var out, all []string
	final := false
	for _, it := range items {
		v, reason := parse(it)
		switch {
		case reason != "":
			out = append(out, it)
			all = append(all, it)
		case !v.IsPrerelease():
			final = true
			out = append(out, it)
		default:
			all = append(all, it)
		}
	}
	if final {
		return out
	}
	return all
}

// filterParsed keeps the items that parse and match, under policy eff.
func filterParsed(items []string, eff Prereleases, match func(*Version, string) bool) []string {
	var finals, pres []string
	for _, it := range items {
		v, reason := parse(it)
		if reason != "" || !match(&v, it) {
			continue
		}
		pre := v.IsPrerelease()
		switch {
		case eff == PrereleasesAllow:
			finals = append(finals, it)
		case eff == PrereleasesExclude && pre:
		case eff == PrereleasesExclude:
			finals = append(finals, it)
		case pre:
			pres = append(pres, it)
		default:
			finals = append(finals, it)
		}
	}
	if eff == PrereleasesDefault && len(finals) == 0 {
		return pres
	}
	return finals
}

// SpecifierSet is a comma-separated list of clauses, all of which must hold.
// The empty set matches every version.
type SpecifierSet struct {
	specs        []specData
	pre          Prereleases
	hasArbitrary bool
}

// ParseSpecifierSet parses "", ">=1.0", ">=1.0, !=1.3.*, <2" and so on.
// Empty items between commas are ignored, as pypa/packaging does.
func ParseSpecifierSet(s string) (SpecifierSet, error) {
	var set SpecifierSet
	rest := s
	for {
		item, tail, more := strings.Cut(rest, ",")
		if item = trimPySpace(item); item != "" {
			sp, reason := parseSpecifier(item)
			if reason != "" {
				return SpecifierSet{}, &ParseError{Input: s, Reason: "invalid specifier " + quote(item) + ": " + reason}
			}
			set.specs = append(set.specs, sp)
			if sp.op == "===" {
				set.hasArbitrary = true
			}
		}
		if !more {
			return set, nil
		}
		rest = tail
	}
}

func quote(s string) string { return "\"" + s + "\"" }

// Specifiers returns the clauses in the order written.
func (s SpecifierSet) Specifiers() []Specifier {
	out := make([]Specifier, len(s.specs))
	for i := range s.specs {
		d := s.specs[i]
		out[i] = Specifier{&d}
	}
	return out
}

// IsEmpty reports a set with no clauses (it matches everything).
func (s SpecifierSet) IsEmpty() bool { return len(s.specs) == 0 }

// WithPrereleases returns s with an explicit pre-release policy, as
// pypa/packaging's SpecifierSet(..., prereleases=...).
func (s SpecifierSet) WithPrereleases(p Prereleases) SpecifierSet {
	s.pre = p
	return s
}

// String returns the clauses sorted and de-duplicated, comma-joined, as
// pypa/packaging's str(SpecifierSet): "!=2.0,>1.0".
func (s SpecifierSet) String() string {
	specs := s.Specifiers()
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].String() < specs[j].String() })
	var b strings.Builder
	var seen []string
	for i := range specs {
		key := specs[i].d.canonicalKey()
		dup := false
		for _, k := range seen {
			if k == key {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		seen = append(seen, key)
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(specs[i].String())
	}
	return b.String()
}

// canonicalKey is what two equal clauses share (pypa/packaging's
// _canonical_spec): "==1.0" and "==1.0.0" are equal, "~=1.0" and "~=1.0.0" not.
func (s *specData) canonicalKey() string {
	if s.op == "===" || s.wildcard {
		return s.op + s.ver
	}
	return s.op + s.v.canonical(s.op != "~=")
}

// prereleasesProp is packaging's SpecifierSet.prereleases property.
func (s *SpecifierSet) prereleasesProp() Prereleases {
	if s.pre != PrereleasesDefault {
		return s.pre
	}
	for i := range s.specs {
		if s.specs[i].prereleasesProp() == PrereleasesAllow {
			return PrereleasesAllow
		}
	}
	return PrereleasesDefault
}

// Contains reports whether v satisfies every clause; prereleases false
// refuses every pre-release. It does not allocate (except for === clauses).
func (s SpecifierSet) Contains(v Version, prereleases bool) bool {
	if !prereleases && v.IsPrerelease() {
		return false
	}
	raw := ""
	if s.hasArbitrary {
		raw = v.String()
	}
	for i := range s.specs {
		if !s.specs[i].matchVersion(&v, raw) {
			return false
		}
	}
	return true
}

// Match is pypa/packaging's SpecifierSet.contains(item, prereleases=p):
// with the default policy a pre-release in range is accepted unless the
// set excludes pre-releases explicitly. An empty set matches any string;
// otherwise a string that is not a version matches only === clauses.
func (s SpecifierSet) Match(item string, p Prereleases) bool {
	eff := resolve(p, s.prereleasesProp())
	v, reason := parse(item)
	parsed := reason == ""
	for i := range s.specs {
		sp := &s.specs[i]
		if sp.op != "===" && !parsed {
			return false
		}
		if !sp.matchVersion(&v, item) {
			return false
		}
	}
	return !(eff == PrereleasesExclude && parsed && v.IsPrerelease())
}

// Filter is pypa/packaging's SpecifierSet.filter(items, prereleases=p).
func (s SpecifierSet) Filter(items []string, p Prereleases) []string {
	eff := resolve(p, s.prereleasesProp())
	if len(s.specs) == 0 {
		return applyPrereleases(items, eff)
	}
	if s.hasArbitrary {
		var m []string
		for _, it := range items {
			if s.Match(it, PrereleasesAllow) { // all clauses, pre-releases allowed
				m = append(m, it)
			}
		}
		return applyPrereleases(m, eff)
	}
	return filterParsed(items, eff, func(v *Version, raw string) bool {
		for i := range s.specs {
			if !s.specs[i].matchVersion(v, raw) {
				return false
			}
		}
		return true
	})
}

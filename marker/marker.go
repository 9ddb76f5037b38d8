// Package marker owns PEP 508 environment markers: parsing the full
// grammar (and/or, parentheses, quoted strings, in/not in, every variable
// including the legacy dotted names pypa/packaging still accepts),
// normalizing them to pypa/packaging's str(Marker) form, and evaluating
// them against an Env, in the metadata context (`extra` is a string) or
// the PEP 751 lock-file context (`extras` and `dependency_groups` are sets).
//
// Semantics follow current pypa/packaging (the conformance vectors
// decide); deliberate differences are listed in
// docs/packaging-differences.md. A Marker is parsed once and evaluated
// without allocating. This package does not probe the host: an Env holds
// exactly the values it is given (package platform builds them), and it
// does not own versions (package pep440).
package marker

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep503"
)

// ParseError reports a marker that does not parse.
type ParseError struct {
	Input  string // the marker as given
	Pos    int    // byte offset of the problem in Input
	Reason string // what was expected or is wrong
}

// Error renders `marker: <reason> at offset N: "<input>"`.
func (e *ParseError) Error() string {
	return "marker: " + e.Reason + " at offset " + strconv.Itoa(e.Pos) + ": " + strconv.Quote(e.Input)
}

// Marker is a parsed PEP 508 marker expression. The zero Marker is the
// absent marker: String() is "" and it evaluates to true.
type Marker struct {
	root *group
}

// group is a parenthesized list: items joined by and/or (and binds
// tighter, as pypa/packaging's any(all(...)) evaluation).
type group struct {
	items []item
	or    []bool // or[i]: the operator before items[i+1] is "or"
}

type item struct {
	sub  *group // a parenthesized group, or
	leaf *leaf  // a comparison
}

// Variables, in the order of Env's slots.
const (
	vImplementationName = iota
	vImplementationVersion
	vOSName
	vPlatformMachine
	vPlatformRelease
	vPlatformSystem
	vPlatformVersion
	vPythonFullVersion
	vPlatformPythonImplementation
	vPythonVersion
	vSysPlatform
	vExtra
	vExtras
	vDependencyGroups
	numVars
)

// varNames are the environment key of each slot.
var varNames = [numVars]string{
	"implementation_name", "implementation_version", "os_name", "platform_machine",
	"platform_release", "platform_system", "platform_version", "python_full_version",
	"platform_python_implementation", "python_version", "sys_platform",
	"extra", "extras", "dependency_groups",
}

// varIndex maps an environment key to its slot.
func varIndex(name string) int {
	for i, n := range varNames {
		if n == name {
			return i
		}
	}
	return -1
}

// isVersionVar: pypa/packaging compares these as PEP 440 versions when
// the other side makes a valid specifier.
func isVersionVar(k int) bool {
	return k == vImplementationVersion || k == vPlatformRelease || k == vPythonFullVersion || k == vPythonVersion
}

func isSetVar(k int) bool { return k == vExtras || k == vDependencyGroups }

// Operators.
const (
	opIn = iota
	opNotIn
	opLT
	opLE
	opEQ
	opNE
	opGE
	opGT
	opCompatible
	opArbitrary
	numOps
)

var opText = [numOps]string{"in", "not in", "<", "<=", "==", "!=", ">=", ">", "~=", "==="}

// Leaf forms (how the environment key is found, as pypa/packaging does).
const (
	formVarLeft    = iota // variable <op> literal: key is the variable
	formVarRight          // literal <op> variable (or literal <op> "known key")
	formUnknownKey        // literal <op> "some other key"
)

// leaf is one comparison, pre-digested for evaluation.
type leaf struct {
	// As written (normalized) for String().
	lhs, rhs       string
	lhsVar, rhsVar bool
	op             int

	form     int
	k        int    // variable slot (formVarLeft, formVarRight)
	key      string // formUnknownKey: the environment key
	lit      string // the literal side (for var op var: the right variable's name)
	litCanon string // NormalizeExtra(lit), for extras/dependency_groups
	litVer   pep440.Version
	litVerOK bool             // lit parses as a version (formVarRight, version keys)
	spec     pep440.Specifier // formVarLeft, version keys: op+lit
	specOK   bool
}

// Parse parses a PEP 508 marker expression such as
// `sys_platform == "linux" and python_version >= "3.9"`.
func Parse(s string) (Marker, error) {
	if !utf8.ValidString(s) {
		return Marker{}, &ParseError{Input: s, Pos: invalidUTF8At(s), Reason: "invalid UTF-8"}
	}
	p := parser{src: s}
	g, err := p.marker()
	if err != nil {
		return Marker{}, err
	}
	if p.pos != len(s) {
		return Marker{}, p.errorf("expected end of marker expression")
	}
	return Marker{root: g}, nil
}

func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(s[i:]); w == 1 {
				return i
			}
		}
	}
	return 0
}

type parser struct {
	src string
	pos int
}

func (p *parser) errorf(reason string) *ParseError {
	return &ParseError{Input: p.src, Pos: p.pos, Reason: reason}
}

// isWordRune is Python's \w for str patterns.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// boundaryBefore reports a \b before p.pos when the token starts with a
// word character.
func (p *parser) boundaryBefore() bool {
	if p.pos == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(p.src[:p.pos])
	return !isWordRune(r)
}

// boundaryAt reports a \b at i after a word character.
func (p *parser) boundaryAt(i int) bool {
	if i >= len(p.src) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(p.src[i:])
	return !isWordRune(r)
}

// word matches a keyword or name at p.pos with word boundaries on both
// sides, without consuming it.
func (p *parser) word(w string) bool {
	return strings.HasPrefix(p.src[p.pos:], w) && p.boundaryBefore() && p.boundaryAt(p.pos+len(w))
}

// ws consumes [ \t]*.
func (p *parser) ws() bool {
	start := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
	return p.pos > start
}

// marker = atom (BOOLOP atom)*
func (p *parser) marker() (*group, error) {
	g := &group{}
	for {
		it, err := p.atom()
		if err != nil {
			return nil, err
		}
		g.items = append(g.items, it)
		switch {
		case p.word("and"):
			p.pos += 3
			g.or = append(g.or, false)
		case p.word("or"):
			p.pos += 2
			g.or = append(g.or, true)
		default:
			return g, nil
		}
	}
}

// atom = WS? ( "(" WS? marker WS? ")" | marker_item ) WS?
func (p *parser) atom() (item, error) {
	p.ws()
	var it item
	if p.pos < len(p.src) && p.src[p.pos] == '(' {
		open := p.pos
		p.pos++
		p.ws()
		g, err := p.marker()
		if err != nil {
			return it, err
		}
		p.ws()
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			e := p.errorf("expected matching ) for (, after marker expression")
			e.Pos = open
			return it, e
		}
		p.pos++
		it.sub = g
	} else {
		l, err := p.item()
		if err != nil {
			return it, err
		}
		it.leaf = l
	}
	p.ws()
	return it, nil
}

// item = var WS? op WS? var
func (p *parser) item() (*leaf, error) {
	p.ws()
	lhs, lhsVar, err := p.operand()
	if err != nil {
		return nil, err
	}
	p.ws()
	op, err := p.operator()
	if err != nil {
		return nil, err
	}
	p.ws()
	rhs, rhsVar, err := p.operand()
	if err != nil {
		return nil, err
	}
	p.ws()
	return newLeaf(lhs, lhsVar, op, rhs, rhsVar), nil
}

// variable spellings accepted (pypa/packaging's tokenizer), longest first
// where one is a prefix of another.
var variableSpellings = []string{
	"python_version", "python_full_version", "os_name", "os.name", "sys_platform",
	"sys.platform", "platform_release", "platform_system", "platform_version",
	"platform.version", "platform_machine", "platform.machine",
	"platform_python_implementation", "platform.python_implementation",
	"python_implementation", "implementation_name", "implementation_version",
	"extras", "extra", "dependency_groups",
}

// operand = VARIABLE | QUOTED_STRING; returns the normalized variable name
// or the string's value.
func (p *parser) operand() (string, bool, error) {
	for _, name := range variableSpellings {
		if p.word(name) {
			p.pos += len(name)
			name = strings.ReplaceAll(name, ".", "_")
			if name == "python_implementation" {
				name = "platform_python_implementation"
			}
			return name, true, nil
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == '\'' || p.src[p.pos] == '"') {
		q := p.src[p.pos]
		end := strings.IndexByte(p.src[p.pos+1:], q)
		if end < 0 {
			return "", false, p.errorf("expected a marker variable or quoted string")
		}
		body := p.src[p.pos+1 : p.pos+1+end]
		val, off, reason := pyUnquote(body)
		if reason != "" {
			e := p.errorf("invalid quoted string: " + reason)
			e.Pos = p.pos + 1 + off
			return "", false, e
		}
		p.pos += end + 2
		return val, false, nil
	}
	return "", false, p.errorf("expected a marker variable or quoted string")
}

// operator = "in" | "not" WS "in" | ===|==|~=|!=|<=|>=|<|>
func (p *parser) operator() (int, error) {
	if p.word("in") {
		p.pos += 2
		return opIn, nil
	}
	if p.word("not") {
		p.pos += 3
		if !p.ws() {
			return 0, p.errorf("expected whitespace after 'not'")
		}
		if !p.word("in") {
			return 0, p.errorf("expected 'in' after 'not'")
		}
		p.pos += 2
		return opNotIn, nil
	}
	rest := p.src[p.pos:]
	for _, c := range [...]struct {
		text string
		op   int
	}{{"===", opArbitrary}, {"==", opEQ}, {"~=", opCompatible}, {"!=", opNE}, {"<=", opLE}, {">=", opGE}, {"<", opLT}, {">", opGT}} {
		if strings.HasPrefix(rest, c.text) {
			p.pos += len(c.text)
			return c.op, nil
		}
	}
	return 0, p.errorf("expected marker operator, one of <=, <, !=, ==, >=, >, ~=, ===, in, not in")
}

// newLeaf normalizes a comparison (extra names as PEP 685 asks) and
// pre-digests it for evaluation.
func newLeaf(lhs string, lhsVar bool, op int, rhs string, rhsVar bool) *leaf {
	// pypa/packaging normalizes a literal compared with extra (and, in the
	// lock-file context, with extras or dependency_groups).
	if lhsVar && !rhsVar && (lhs == "extra" || isSetVar(varIndex(lhs))) {
		rhs = NormalizeExtra(rhs)
	}
	if rhsVar && !lhsVar && (rhs == "extra" || isSetVar(varIndex(rhs))) {
		lhs = NormalizeExtra(lhs)
	}
	l := &leaf{lhs: lhs, rhs: rhs, lhsVar: lhsVar, rhsVar: rhsVar, op: op}
	switch {
	case lhsVar:
		l.form, l.k, l.lit = formVarLeft, varIndex(lhs), rhs
	case varIndex(rhs) >= 0:
		l.form, l.k, l.lit = formVarRight, varIndex(rhs), lhs
	default:
		l.form, l.key, l.lit = formUnknownKey, rhs, lhs
	}
	l.litCanon = NormalizeExtra(l.lit)
	if l.form == formVarLeft && isVersionVar(l.k) && op != opIn && op != opNotIn {
		if sp, err := pep440.ParseSpecifier(opText[op] + l.lit); err == nil {
			l.spec, l.specOK = sp, true
		}
	}
	if l.form == formVarRight && isVersionVar(l.k) {
		if v, err := pep440.Parse(l.lit); err == nil {
			l.litVer, l.litVerOK = v, true
		}
	}
	return l
}

// String returns the normalized form, as pypa/packaging's str(Marker):
// single spaces, double-quoted values, canonical variable names,
// normalized extra names, redundant parentheses dropped. The zero Marker
// gives "".
func (m Marker) String() string {
	if m.root == nil {
		return ""
	}
	var b strings.Builder
	formatGroup(&b, m.root, true)
	return b.String()
}

func formatGroup(b *strings.Builder, g *group, first bool) {
	if len(g.items) == 1 {
		if g.items[0].sub != nil {
			// pypa/packaging formats a lone nested group as a top-level
			// one, dropping parentheses that can matter; keep them.
			formatGroup(b, g.items[0].sub, first)
			return
		}
		formatLeaf(b, g.items[0].leaf)
		return
	}
	if !first {
		b.WriteByte('(')
	}
	for i, it := range g.items {
		if i > 0 {
			if g.or[i-1] {
				b.WriteString(" or ")
			} else {
				b.WriteString(" and ")
			}
		}
		if it.sub != nil {
			formatGroup(b, it.sub, false)
		} else {
			formatLeaf(b, it.leaf)
		}
	}
	if !first {
		b.WriteByte(')')
	}
}

func formatLeaf(b *strings.Builder, l *leaf) {
	formatOperand(b, l.lhs, l.lhsVar)
	b.WriteByte(' ')
	b.WriteString(opText[l.op])
	b.WriteByte(' ')
	formatOperand(b, l.rhs, l.rhsVar)
}

func formatOperand(b *strings.Builder, s string, isVar bool) {
	if isVar {
		b.WriteString(s)
		return
	}
	b.WriteString(pyQuote(s))
}

// NormalizeExtra normalizes an extra or dependency-group name as PEP 685
// (PEP 503 rules) asks: runs of "-", "_" and "." become "-", lower case
// as Python's str.lower() does. It is pep503.Normalize.
func NormalizeExtra(name string) string { return pep503.Normalize(name) }

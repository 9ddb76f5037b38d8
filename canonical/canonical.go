// Package canonical owns RFC 8785 (the JSON Canonicalization Scheme):
// Transform turns a JSON document into its canonical form, refusing
// invalid UTF-8, duplicate member names, lone surrogates, numbers outside
// IEEE 754 doubles and anything else RFC 8785 §3.1 rules out (unlike
// gowebpki/jcs, which passes such input through); Marshal is encoding/json
// followed by Transform. Every cruxprov digest hashes its output.
//
// It does not hash, know about digests, or print.
package canonical

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Error says why a JSON text has no RFC 8785 canonical form: the
// byte offset in the input where the problem was found and a reason. When
// CanonicalJSON cannot marshal its value, Offset is -1 and Err is the
// encoding/json error.
type Error struct {
	Offset int
	Reason string
	Err    error
	kind   canonKind
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return "canonical json: " + e.Reason
	}
	return fmt.Sprintf("canonical json: offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns the marshalling error, if any.
func (e *Error) Unwrap() error { return e.Err }

// canonKind classifies a Error for tests, which must not compare
// strings.
type canonKind int

const (
	kSyntax canonKind = iota + 1
	kTruncated
	kTrailing
	kBOM
	kUTF8
	kSurrogate
	kNonchar
	kControl
	kEscape
	kDuplicate
	kNumber
	kRange
	kDepth
	kMarshal
)

// maxDepth bounds nesting so hostile input cannot exhaust memory through
// the recursion; no document cruxprov hashes comes near it.
const maxDepth = 1000

// Canonicalize returns the RFC 8785 (JCS) canonical form of the JSON text b.
//
// Input is parsed strictly as RFC 8259 JSON restricted to I-JSON (RFC 7493),
// as RFC 8785 §3.1 requires. It is refused with a *Error when it is
// not valid UTF-8, starts with a byte order mark, has an unescaped control
// character in a string, a \u escape that is a lone surrogate, a string
// holding a Unicode noncharacter (I-JSON §2.1), an object with two members
// whose names are equal after unescaping, a number outside the JSON grammar
// (leading '+', leading zeros, "NaN", "Infinity", ".5", "1.") or of a
// magnitude that overflows an IEEE 754 double, anything after the value
// but whitespace, or is truncated. Nesting deeper than 1000 is refused too.
//
// Output: no whitespace; object members sorted by the UTF-16 code units of
// their names; strings with only '"', '\\' and U+0000..U+001F escaped (as
// \b \t \n \f \r, the others as \u00xx with lowercase hex), every other
// character as UTF-8; numbers parsed as IEEE 754 doubles (rounded to
// nearest, so values that underflow become 0) and written as ECMAScript's
// Number.prototype.toString does (RFC 8785 §3.2.2.3).
func Transform(b []byte) ([]byte, error) {
	p := parser{in: b}
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return nil, p.fail(0, kBOM, "byte order mark is not allowed")
	}
	p.skipWS()
	out := make([]byte, 0, len(b))
	out, err := p.value(out, 0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos < len(p.in) {
		if !utf8.Valid(p.in[p.pos:]) {
			return nil, p.fail(p.pos, kUTF8, "invalid UTF-8")
		}
		return nil, p.fail(p.pos, kTrailing, "data after the JSON value")
	}
	return out, nil
}

// CanonicalJSON marshals v with encoding/json (without HTML escaping) and
// returns the RFC 8785 canonical form of the result. Every error is a
// *Error. Note that encoding/json replaces invalid UTF-8 in Go
// strings with U+FFFD: callers hashing identities validate their strings
// first (the typed digests of this package do).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, &Error{Offset: -1, Reason: "cannot marshal: " + err.Error(), Err: err, kind: kMarshal}
	}
	return Transform(buf.Bytes())
}

type parser struct {
	in  []byte
	pos int
}

func (p *parser) fail(off int, k canonKind, format string, args ...any) *Error {
	return &Error{Offset: off, Reason: fmt.Sprintf(format, args...), kind: k}
}

func (p *parser) truncated() *Error {
	return p.fail(len(p.in), kTruncated, "unexpected end of input")
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at p.pos to out.
func (p *parser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.truncated()
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendString(out, s), nil
	case c == '-' || '0' <= c && c <= '9':
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return nil, p.unexpected("a value")
	}
}

func (p *parser) unexpected(want string) *Error {
	if p.pos >= len(p.in) {
		return p.truncated()
	}
	c := p.in[p.pos]
	if c >= utf8.RuneSelf {
		if r, _ := utf8.DecodeRune(p.in[p.pos:]); r == utf8.RuneError {
			return p.fail(p.pos, kUTF8, "invalid UTF-8")
		}
		return p.fail(p.pos, kSyntax, "unexpected non-ASCII character, want %s", want)
	}
	return p.fail(p.pos, kSyntax, "unexpected %q, want %s", c, want)
}

func (p *parser) literal(out []byte, lit string) ([]byte, error) {
	for i := 0; i < len(lit); i++ {
		if p.pos >= len(p.in) {
			return nil, p.truncated()
		}
		if p.in[p.pos] != lit[i] {
			return nil, p.unexpected("literal " + lit)
		}
		p.pos++
	}
	return append(out, lit...), nil
}

func (p *parser) array(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail(p.pos, kDepth, "nesting deeper than %d", maxDepth)
	}
	p.pos++ // '['
	out = append(out, '[')
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for {
		p.skipWS()
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.truncated()
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			out = append(out, ',')
		case ']':
			p.pos++
			return append(out, ']'), nil
		default:
			return nil, p.unexpected("',' or ']'")
		}
	}
}

// member is one object member while its object is being sorted: its name
// as UTF-16 code units and its canonical value bytes, a span of the output.
type member struct {
	key        []uint16
	name       string
	start, end int
}

func (p *parser) object(out []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, p.fail(p.pos, kDepth, "nesting deeper than %d", maxDepth)
	}
	p.pos++ // '{'
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, '{', '}'), nil
	}
	// Values are appended after base in input order, then the region is
	// rewritten in sorted order.
	base := len(out)
	var members []member
	var seen map[string]struct{} // once members is long enough to need it
	for {
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.truncated()
		}
		if p.in[p.pos] != '"' {
			return nil, p.unexpected("a member name")
		}
		keyAt := p.pos
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if dup(members, &seen, name) {
			return nil, p.fail(keyAt, kDuplicate, "duplicate key %q", name)
		}
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.truncated()
		}
		if p.in[p.pos] != ':' {
			return nil, p.unexpected("':'")
		}
		p.pos++
		p.skipWS()
		start := len(out)
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		members = append(members, member{key: utf16.Encode([]rune(name)), name: name, start: start, end: len(out)})
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.truncated()
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		return nil, p.unexpected("',' or '}'")
	}
	slices.SortFunc(members, func(a, b member) int { return slices.Compare(a.key, b.key) })
	values := bytes.Clone(out[base:])
	out = append(out[:base], '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, m.name)
		out = append(out, ':')
		out = append(out, values[m.start-base:m.end-base]...)
	}
	return append(out, '}'), nil
}

// dup reports whether name is already among members; it switches from a
// scan to a set so that an object with many members stays linear.
func dup(members []member, seen *map[string]struct{}, name string) bool {
	if len(members) < 16 {
		for i := range members {
			if members[i].name == name {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(members))
		for i := range members {
			(*seen)[members[i].name] = struct{}{}
		}
	}
	if _, ok := (*seen)[name]; ok {
		return true
	}
	(*seen)[name] = struct{}{}
	return false
}

// str parses the string at p.pos (which is '"') and returns its value.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	// Fast path: no escapes, all ASCII printable.
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := string(p.in[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.truncated()
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(p.pos, kControl, "unescaped control character U+%04X in a string", c)
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, n := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && n <= 1 {
				if !utf8.FullRune(p.in[p.pos:]) {
					return "", p.fail(p.pos, kUTF8, "invalid UTF-8 (truncated sequence)")
				}
				return "", p.fail(p.pos, kUTF8, "invalid UTF-8")
			}
			if isNonchar(r) {
				return "", p.fail(p.pos, kNonchar, "noncharacter U+%04X is not allowed in I-JSON", r)
			}
			buf = append(buf, p.in[p.pos:p.pos+n]...)
			p.pos += n
		}
	}
}

// escape parses the escape at p.pos (which is '\\') and returns its rune.
func (p *parser) escape() (rune, error) {
	at := p.pos
	if p.pos+1 >= len(p.in) {
		return 0, p.truncated()
	}
	c := p.in[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
	default:
		return 0, p.fail(at, kEscape, "invalid escape \\%c", c)
	}
	r, err := p.hex4(at)
	if err != nil {
		return 0, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00:
		if p.pos+1 < len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
			lowAt := p.pos
			p.pos += 2
			lo, err := p.hex4(lowAt)
			if err != nil {
				return 0, err
			}
			if 0xdc00 <= lo && lo < 0xe000 {
				r = utf16.DecodeRune(r, lo)
				break
			}
		} else if rest := p.in[p.pos:]; len(rest) == 0 || string(rest) == "\\" {
			return 0, p.truncated()
		}
		return 0, p.fail(at, kSurrogate, "lone high surrogate \\u%04x", r)
	case utf16.IsSurrogate(r):
		return 0, p.fail(at, kSurrogate, "lone low surrogate \\u%04x", r)
	}
	if isNonchar(r) {
		return 0, p.fail(at, kNonchar, "noncharacter U+%04X is not allowed in I-JSON", r)
	}
	return r, nil
}

// hex4 reads the four hex digits of a \u escape that started at at.
func (p *parser) hex4(at int) (rune, error) {
	if p.pos+4 > len(p.in) {
		for i := p.pos; i < len(p.in); i++ {
			if unhex(p.in[i]) < 0 {
				return 0, p.fail(at, kEscape, "invalid \\u escape")
			}
		}
		return 0, p.truncated()
	}
	var r rune
	for i := 0; i < 4; i++ {
		v := unhex(p.in[p.pos+i])
		if v < 0 {
			return 0, p.fail(at, kEscape, "invalid \\u escape")
		}
		r = r<<4 | rune(v)
	}
	p.pos += 4
	return r, nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// isNonchar reports Unicode noncharacters: U+FDD0..U+FDEF and the last two
// code points of every plane.
func isNonchar(r rune) bool {
	return 0xfdd0 <= r && r <= 0xfdef || r&0xfffe == 0xfffe
}

func (p *parser) number(out []byte) ([]byte, error) {
	start := p.pos
	i := p.pos
	in := p.in
	digits := func() int {
		n := 0
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if in[i] == '-' {
		i++
	}
	if i >= len(in) {
		return nil, p.truncated()
	}
	switch {
	case in[i] == '0':
		i++
		if i < len(in) && '0' <= in[i] && in[i] <= '9' {
			return nil, p.fail(start, kNumber, "number with a leading zero")
		}
	case '1' <= in[i] && in[i] <= '9':
		digits()
	default:
		p.pos = i
		return nil, p.fail(start, kNumber, "invalid number")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) {
			return nil, p.truncated()
		}
		if digits() == 0 {
			return nil, p.fail(start, kNumber, "invalid number: no digit after '.'")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) {
			return nil, p.truncated()
		}
		if digits() == 0 {
			return nil, p.fail(start, kNumber, "invalid number: no digit in the exponent")
		}
	}
	p.pos = i
	f, err := strconv.ParseFloat(string(in[start:i]), 64)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, p.fail(start, kRange, "number out of the range of an IEEE 754 double")
	}
	if err != nil {
		return nil, p.fail(start, kNumber, "invalid number")
	}
	return appendNumber(out, f), nil
}

// appendNumber appends f written as ECMAScript's Number.prototype.toString
// does (RFC 8785 §3.2.2.3): the shortest decimal that round-trips, plain
// notation for 1e-7 < |f| < 1e21, otherwise exponent notation with an
// explicit sign ("1e+21", "1.5e-7"), and -0 as "0". f must be finite.
func appendNumber(out []byte, f float64) []byte {
	if f == 0 {
		return append(out, '0')
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		panic("digest.appendNumber: non-finite number")
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// Shortest round-trip digits and exponent: d.ddde±x.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	mant, exp, _ := bytes.Cut(e, []byte("e"))
	x, _ := strconv.Atoi(string(exp))
	var ds [24]byte
	d := ds[:0]
	for _, c := range mant {
		if c != '.' {
			d = append(d, c)
		}
	}
	k := len(d)
	n := x + 1 // value = 0.d × 10^n
	switch {
	case k <= n && n <= 21:
		out = append(out, d...)
		for i := 0; i < n-k; i++ {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, d[:n]...)
		out = append(out, '.')
		out = append(out, d[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for i := 0; i < -n; i++ {
			out = append(out, '0')
		}
		out = append(out, d...)
	default:
		out = append(out, d[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, d[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return out
}

// appendString appends s as an RFC 8785 string literal.
func appendString(out []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	out = append(out, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[last:i]...)
		last = i + 1
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\t':
			out = append(out, '\\', 't')
		case '\n':
			out = append(out, '\\', 'n')
		case '\f':
			out = append(out, '\\', 'f')
		case '\r':
			out = append(out, '\\', 'r')
		default:
			out = append(out, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
	}
	out = append(out, s[last:]...)
	return append(out, '"')
}

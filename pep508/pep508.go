// Package pep508 owns PEP 508 dependency specifiers (requirements such as
// `httpx[http2]>=0.27,<1; python_version >= "3.9"` or `name @ https://…`),
// as a wheel's METADATA declares them in Requires-Dist: parsing them into
// a name, extras, a version specifier set, a direct URL and a marker, and
// formatting them back as pypa/packaging's str(Requirement) does.
//
// It composes the packages below it and owns none of their parts: version
// specifiers are pep440's, markers marker's, name normalization pep503's.
// It does not resolve anything and does no I/O. A Requirement is an
// immutable value, safe for concurrent use.
package pep508

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/marker"
	"github.com/cruxible/cruxprov/pep440"
	"github.com/cruxible/cruxprov/pep503"
)

// Requirement is one parsed PEP 508 dependency specifier.
type Requirement struct {
	// Name is the project name as written; Key is its PEP 503 form.
	Name string
	// Extras are the bracketed extras as written, sorted and without
	// duplicates; nil when there are none.
	Extras []string
	// Specifier is the version specifier set, empty when none is given
	// (it then allows every version). Never set together with URL.
	Specifier pep440.SpecifierSet
	// URL is the direct reference after "@", "" when there is none.
	URL string
	// Marker is the environment marker after ";"; the zero Marker (always
	// true) when there is none.
	Marker marker.Marker
}

// Key is the requirement's project name, PEP 503 normalized: the name
// to compare with a lock's or an index's.
func (r Requirement) Key() string { return pep503.Normalize(r.Name) }

// String formats r as pypa/packaging's str(Requirement):
// name[extra,…]specifier, or name[extra,…] @ url, then "; marker".
// Parse(r.String()) gives r back.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	b.WriteString(r.Specifier.String())
	m := r.Marker.String()
	if r.URL != "" {
		b.WriteString(" @ " + r.URL)
		if m != "" {
			b.WriteByte(' ')
		}
	}
	if m != "" {
		b.WriteString("; " + m)
	}
	return b.String()
}

// ParseError reports a requirement that does not parse.
type ParseError struct {
	Input  string // the requirement as given
	Pos    int    // byte offset of the problem in Input
	Reason string // what was expected or is wrong
	Err    error  // the specifier's or the marker's parse error, if it is one
}

// Error renders `requirement: <reason> at offset N: "<input>"`.
func (e *ParseError) Error() string {
	return "requirement: " + e.Reason + " at offset " + strconv.Itoa(e.Pos) + ": " + strconv.Quote(e.Input)
}

// Unwrap returns the specifier's or the marker's parse error.
func (e *ParseError) Unwrap() error { return e.Err }

// Parse parses one PEP 508 requirement, with the grammar pypa/packaging
// accepts:
//
//	name [ "[" extra ("," extra)* "]" ] ( specifier | "(" specifier ")" | "@" url ) [ ";" marker ]
//
// Whitespace (spaces and tabs) may surround every token. A name and each
// extra is PEP 508's identifier: ASCII letters and digits, with ".", "-"
// and "_" inside. The specifier is pep440.ParseSpecifierSet's, but its
// clauses must each start with an operator and no clause may be empty. A
// URL runs to the next whitespace and needs a scheme; a marker after a
// URL needs whitespace before its ";". The marker is marker.Parse's.
func Parse(s string) (Requirement, error) {
	if !utf8.ValidString(s) {
		return Requirement{}, &ParseError{Input: s, Reason: "invalid UTF-8"}
	}
	p := parser{src: s}
	var r Requirement
	p.ws()
	var ok bool
	if r.Name, ok = p.ident(); !ok {
		return Requirement{}, p.errorf("expected a package name", nil)
	}
	p.ws()
	if p.peek('[') {
		p.pos++
		if err := p.extras(&r); err != nil {
			return Requirement{}, err
		}
		p.ws()
	}
	switch {
	case p.peek('@'):
		p.pos++
		p.ws()
		start := p.pos
		for p.pos < len(s) && s[p.pos] != ' ' && s[p.pos] != '\t' {
			p.pos++
		}
		r.URL = s[start:p.pos]
		if r.URL == "" {
			return Requirement{}, p.errorf("expected a URL after @", nil)
		}
		if u, err := url.Parse(r.URL); err != nil || u.Scheme == "" {
			return Requirement{}, &ParseError{Input: s, Pos: start, Reason: "the URL has no scheme or does not parse", Err: err}
		}
		if p.pos == len(s) {
			return r, nil
		}
		p.ws()
		if p.pos == len(s) {
			return r, nil
		}
		if !p.peek(';') {
			return Requirement{}, p.errorf(`expected ";" and a marker after the URL`, nil)
		}
	case p.peek('('):
		p.pos++
		end := strings.IndexByte(s[p.pos:], ')')
		if end < 0 {
			return Requirement{}, p.errorf(`expected ")" closing the version specifier`, nil)
		}
		if err := p.specifier(&r, p.pos+end, true); err != nil {
			return Requirement{}, err
		}
		p.pos++ // ")"
		p.ws()
	case p.pos < len(s) && strings.IndexByte("<>=!~", s[p.pos]) >= 0:
		end := strings.IndexByte(s[p.pos:], ';')
		if end < 0 {
			end = len(s) - p.pos
		}
		if err := p.specifier(&r, p.pos+end, false); err != nil {
			return Requirement{}, err
		}
	}
	if p.pos == len(s) {
		return r, nil
	}
	if !p.peek(';') {
		return Requirement{}, p.errorf(`expected a version specifier, "@ URL", ";" and a marker, or the end`, nil)
	}
	p.pos++
	m, err := marker.Parse(s[p.pos:])
	if err != nil {
		pos := p.pos
		var me *marker.ParseError
		if errors.As(err, &me) {
			pos += me.Pos
		}
		return Requirement{}, &ParseError{Input: s, Pos: pos, Reason: "invalid marker", Err: err}
	}
	if m.String() == "" {
		return Requirement{}, p.errorf(`expected a marker after ";"`, nil)
	}
	r.Marker = m
	return r, nil
}

type parser struct {
	src string
	pos int
}

func (p *parser) errorf(reason string, err error) *ParseError {
	return &ParseError{Input: p.src, Pos: p.pos, Reason: reason, Err: err}
}

func (p *parser) peek(c byte) bool { return p.pos < len(p.src) && p.src[p.pos] == c }

// ws skips spaces and tabs.
func (p *parser) ws() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// ident reads PEP 508's identifier: alphanumerics, with ".", "-" and "_"
// between them.
func (p *parser) ident() (string, bool) {
	start := p.pos
	if !(p.pos < len(p.src) && alnum(p.src[p.pos])) {
		return "", false
	}
	end := p.pos + 1
	for i := p.pos + 1; i < len(p.src); i++ {
		c := p.src[i]
		if alnum(c) {
			end = i + 1
		} else if c != '.' && c != '-' && c != '_' {
			break
		}
	}
	p.pos = end
	return p.src[start:end], true
}

// extras reads the extras list after "[" up to and including "]".
func (p *parser) extras(r *Requirement) error {
	p.ws()
	if p.peek(']') {
		p.pos++
		return nil
	}
	for {
		x, ok := p.ident()
		if !ok {
			return p.errorf("expected an extra name", nil)
		}
		if !slices.Contains(r.Extras, x) {
			r.Extras = append(r.Extras, x)
		}
		p.ws()
		switch {
		case p.peek(','):
			p.pos++
			p.ws()
		case p.peek(']'):
			p.pos++
			slices.Sort(r.Extras)
			return nil
		default:
			return p.errorf(`expected "," or "]" in the extras`, nil)
		}
	}
}

// specifier parses src[p.pos:end] as the version specifier set and moves
// to end. In parentheses the set may be empty.
func (p *parser) specifier(r *Requirement, end int, parens bool) error {
	text := p.src[p.pos:end]
	if strings.TrimLeft(text, " \t") == "" && parens {
		p.pos = end
		return nil
	}
	off := p.pos
	for item := range strings.SplitSeq(text, ",") {
		t := strings.TrimLeft(item, " \t")
		if t == "" || strings.IndexByte("<>=!~", t[0]) < 0 {
			p.pos = off + len(item) - len(t)
			return p.errorf("expected a version specifier (an operator and a version)", nil)
		}
		off += len(item) + 1
	}
	set, err := pep440.ParseSpecifierSet(text)
	if err != nil {
		return p.errorf("invalid version specifier", err)
	}
	r.Specifier = set
	p.pos = end
	return nil
}

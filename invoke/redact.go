package invoke

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

const redacted = "[redacted]"

// redactor replaces every text form of a set of secret values.
type redactor struct {
	forms []string // longest first
	rep   *strings.Replacer
}

func newRedactor(values []string) *redactor {
	set := map[string]bool{}
	for _, v := range values {
		if v == "" {
			continue
		}
		for _, f := range secretForms(v) {
			if f != "" {
				set[f] = true
			}
		}
	}
	r := &redactor{}
	for f := range set {
		r.forms = append(r.forms, f)
	}
	sort.Slice(r.forms, func(i, j int) bool {
		if len(r.forms[i]) != len(r.forms[j]) {
			return len(r.forms[i]) > len(r.forms[j])
		}
		return r.forms[i] < r.forms[j]
	})
	pairs := make([]string, 0, 2*len(r.forms))
	for _, f := range r.forms {
		pairs = append(pairs, f, redacted)
	}
	r.rep = strings.NewReplacer(pairs...)
	return r
}

// text redacts every whole occurrence of every form, in one pass: at each
// position the longest form that matches, and never inside a
// "[redacted]" it wrote (replacing form after form redacted a short
// secret's letters in the marker a longer form had left).
func (r *redactor) text(s string) string {
	if len(r.forms) == 0 {
		return s
	}
	return r.rep.Replace(s)
}

// tail redacts s, the end of a stream (cut: the stream's first bytes are
// not in s): besides whole occurrences, a form cut by the window's start
// (s begins with a suffix of it), only where the window is cut there,
// and one cut by its end (s ends with a prefix of it: a run killed
// mid-write) are redacted too. A stream kept whole from its first byte
// is not redacted at its start: a secret ending in "T" made a stderr of
// "Traceback …" read "[redacted]raceback …".
func (r *redactor) tail(s string, cut bool) string {
	s = r.text(s)
	for _, f := range r.forms {
		for k := len(f) - 1; k > 0 && cut; k-- {
			if strings.HasPrefix(s, f[len(f)-k:]) {
				s = redacted + s[k:]
				break
			}
		}
		for k := len(f) - 1; k > 0; k-- {
			if strings.HasSuffix(s, f[:k]) {
				s = s[:len(s)-k] + redacted
				break
			}
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// secretForms are the forms a value takes in text a process writes: raw,
// JSON-escaped as Python's json.dumps writes it (ASCII escapes or not) and
// as Go's encoding/json does, and Python's repr and ascii (either quote),
// each without its surrounding quotes.
func secretForms(v string) []string {
	return append([]string{
		v,
		pyJSON(v, true), pyJSON(v, false),
		pyRepr(v, '\'', false), pyRepr(v, '"', false),
		pyRepr(v, '\'', true), pyRepr(v, '"', true),
		goJSON(v),
	}, urlForms(v)...)
}

// urlForms are v percent-encoded as a URL's query or path carries it (a
// token in an egress URL): Go's and Python's query escaping (space as
// "+" or "%20": url.QueryEscape, urllib.parse.quote_plus and
// quote(safe="")), Python's path escaping (urllib.parse.quote, which
// keeps "/" and escapes the sub-delimiters Go's path escaping keeps), Go's
// path escaping with and without "/", each with upper- and lower-case hex.
func urlForms(v string) []string {
	q, p := url.QueryEscape(v), url.PathEscape(v)
	q20 := strings.ReplaceAll(q, "+", "%20")
	var out []string
	for _, f := range []string{q, q20, strings.ReplaceAll(q20, "%2F", "/"), p, strings.ReplaceAll(p, "%2F", "/")} {
		out = append(out, f, pctLower.ReplaceAllStringFunc(f, strings.ToLower))
	}
	return out
}

// pctLower finds a percent-escape.
var pctLower = regexp.MustCompile(`%[0-9A-F]{2}`)

func pyJSON(v string, ascii bool) string {
	var b strings.Builder
	for _, c := range v {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case c < 0x20 || (ascii && c > 0x7e):
				if c > 0xffff {
					r1, r2 := utf16.EncodeRune(c)
					fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				} else {
					fmt.Fprintf(&b, `\u%04x`, c)
				}
			default:
				b.WriteRune(c)
			}
		}
	}
	return b.String()
}

func goJSON(v string) string {
	var b strings.Builder
	for _, c := range v {
		switch c {
		case '<', '>', '&', '\u2028', '\u2029':
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteString(pyJSON(string(c), false))
		}
	}
	return b.String()
}

// pyRepr is the inside of Python's repr (ascii: ascii()) of v quoted by q.
func pyRepr(v string, q rune, ascii bool) string {
	var b strings.Builder
	for i, c := range v {
		if c == utf8.RuneError && !strings.HasPrefix(v[i:], "\uFFFD") {
			fmt.Fprintf(&b, `\x%02x`, v[i])
			continue
		}
		switch {
		case c == q || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c < 0x7f:
			b.WriteRune(c)
		case !ascii && unicode.IsPrint(c):
			b.WriteRune(c)
		case c <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			fmt.Fprintf(&b, `\U%08x`, c)
		}
	}
	return b.String()
}

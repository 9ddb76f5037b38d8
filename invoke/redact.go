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
	return r
}

// span is a byte range [lo, hi) of a text to redact.
type span struct{ lo, hi int }

// spans finds what to redact in s: every occurrence of every form,
// overlapping ones included ("aa" in "aaa" is both of its places); with
// start, the longest end of a form s begins with (s is cut there: the
// form's start was before it); with end, the longest start of a form s
// ends with (cut there: a run killed mid-write); with both, all of s when
// it lies inside a form. Ranges that overlap are
// merged (two secrets sharing bytes, "abc" and "bcd" in "abcd", are one
// range: redacting one and keeping the rest of the other showed its
// end); ranges that only touch stay apart. Sorted, disjoint.
func (r *redactor) spans(s string, start, end bool) []span {
	var sp []span
	for _, f := range r.forms {
		last := -1 // this form's latest span in sp
		for i := 0; i+len(f) <= len(s); {
			j := strings.Index(s[i:], f)
			if j < 0 {
				break
			}
			lo, hi := i+j, i+j+len(f)
			if last >= 0 && lo < sp[last].hi {
				sp[last].hi = hi // overlaps its previous occurrence
			} else {
				sp = append(sp, span{lo, hi})
				last = len(sp) - 1
			}
			i = lo + 1
		}
		if start && end && 0 < len(s) && len(s) < len(f) && strings.Contains(f, s) {
			// A window cut at both ends inside one secret (one longer
			// than the window, written while the run was killed or its
			// output budget ran out): neither its start nor its end is
			// the secret's, and the middle was kept.
			sp = append(sp, span{0, len(s)})
		}
		if start {
			for k := min(len(f)-1, len(s)); k > 0; k-- {
				if s[:k] == f[len(f)-k:] {
					sp = append(sp, span{0, k})
					break
				}
			}
		}
		if end {
			for k := min(len(f)-1, len(s)); k > 0; k-- {
				if s[len(s)-k:] == f[:k] {
					sp = append(sp, span{len(s) - k, len(s)})
					break
				}
			}
		}
	}
	// A form that is not valid UTF-8 (a secret read from a file is any
	// bytes) can match a part of a character: the range takes the whole
	// character, so that what is kept around it is not cut mid-character.
	for i := range sp {
		for n := 0; n < utf8.UTFMax-1 && sp[i].lo > 0 && !utf8.RuneStart(s[sp[i].lo]); n++ {
			sp[i].lo--
		}
		for n := 0; n < utf8.UTFMax-1 && sp[i].hi < len(s) && !utf8.RuneStart(s[sp[i].hi]); n++ {
			sp[i].hi++
		}
	}
	sp = merge(sp)
	if len(sp) == 0 {
		return sp
	}
	// A marker already in s (the harness redacts the messages and the
	// tracebacks it writes, before this sees them) is one: a match inside
	// it ("e", "act" of a "[redacted]") is no secret's, and redacting it
	// nested markers ("[r[redacted]d[redacted]ct[redacted]d]"); a range
	// that overlaps it takes all of it, so that no part of a marker is
	// left beside a new one.
	marks := markers(s, start, end)
	if len(marks) == 0 {
		return sp
	}
	kept := sp[:0]
	for _, x := range sp {
		if i := sort.Search(len(marks), func(i int) bool { return marks[i].hi >= x.hi }); i < len(marks) && marks[i].lo <= x.lo {
			continue // inside marks[i]
		}
		kept = append(kept, x)
	}
	for _, m := range marks {
		// The first range ending after m starts: does it start before m ends?
		if i := sort.Search(len(kept), func(i int) bool { return kept[i].hi > m.lo }); i < len(kept) && kept[i].lo < m.hi {
			kept = append(kept, m)
		}
	}
	return merge(kept)
}

// merge sorts sp and merges the ranges that overlap (not those that only
// touch).
func merge(sp []span) []span {
	if len(sp) < 2 {
		return sp
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].lo < sp[j].lo })
	out := sp[:1]
	for _, x := range sp[1:] {
		if p := &out[len(out)-1]; x.lo < p.hi {
			p.hi = max(p.hi, x.hi)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// markers are the places of the marker in s, in order; with start, and
// end, also the end of one that s begins with and the start of one it
// ends with (a stream's window cut through one).
func markers(s string, start, end bool) []span {
	var ms []span
	if start {
		for k := min(len(redacted)-1, len(s)); k > 0; k-- {
			if s[:k] == redacted[len(redacted)-k:] {
				ms = append(ms, span{0, k})
				break
			}
		}
	}
	for i := 0; ; {
		j := strings.Index(s[i:], redacted)
		if j < 0 {
			break
		}
		ms = append(ms, span{i + j, i + j + len(redacted)})
		i += j + len(redacted)
	}
	if end {
		for k := min(len(redacted)-1, len(s)); k > 0; k-- {
			if s[len(s)-k:] == redacted[:k] {
				if lo := len(s) - k; len(ms) == 0 || ms[len(ms)-1].hi <= lo {
					ms = append(ms, span{lo, len(s)})
				}
				break
			}
		}
	}
	return ms
}

// redact is s with each of sp replaced by the marker, once: the marker is
// never searched again, so a secret that is a part of it ("e", "act",
// "]") does not nest markers in markers, and a secret's start or end is
// never matched against a marker's letters. What is kept between the
// ranges is made valid UTF-8, as the ledger would make it, and searched
// once more where that changed it: a secret with U+FFFD in it must not
// appear where the kept bytes were invalid. (That second search is of
// valid UTF-8 and its ranges take whole characters, so what it keeps is
// valid and is not searched again.)
func (r *redactor) redact(s string, sp []span) string {
	var b strings.Builder
	b.Grow(len(s) + len(sp)*len(redacted))
	keep := func(t string) {
		if utf8.ValidString(t) {
			b.WriteString(t)
			return
		}
		t = strings.ToValidUTF8(t, "\uFFFD")
		at := 0
		for _, x := range r.spans(t, false, false) {
			b.WriteString(t[at:x.lo])
			b.WriteString(redacted)
			at = x.hi
		}
		b.WriteString(t[at:])
	}
	at := 0
	for _, x := range sp {
		keep(s[at:x.lo])
		b.WriteString(redacted)
		at = x.hi
	}
	keep(s[at:])
	return b.String()
}

// text redacts every occurrence of every form in s, in one pass over s.
func (r *redactor) text(s string) string {
	if len(r.forms) == 0 {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return r.redact(s, r.spans(s, false, false))
}

// tail redacts s, the end of a stream (cut: the stream's first bytes are
// not in s): besides whole occurrences, a form cut by the window's start
// (s begins with a suffix of it), only where the window is cut there,
// and one cut by its end (s ends with a prefix of it: a run killed
// mid-write) are redacted too. A stream kept whole from its first byte
// is not redacted at its start: a secret ending in "T" made a stderr of
// "Traceback …" read "[redacted]raceback …". All in one pass over s: the
// ends were matched against the text already redacted, so that a secret
// ending in "[r" took the start of a marker for its own ("[redacted]"
// became "[redacted]edacted]").
func (r *redactor) tail(s string, cut bool) string {
	return r.redact(s, r.spans(s, cut, true))
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

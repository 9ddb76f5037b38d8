package lockfile

import (
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// This file is a fast reader for the subset of TOML that lock files use:
// bare and quoted (single-line) keys, dotted keys, [table] and [[array]]
// headers, single-line basic and literal strings, decimal integers,
// booleans, offset date-times, arrays and single-line inline tables. It
// never reports an error of its own: on anything outside that subset, and
// on anything invalid, it gives up and Parse hands the document to
// BurntSushi/toml, which decides (and words the error). So it must never
// accept a document BurntSushi rejects, and must build the same values
// BurntSushi does; FuzzTOMLDifferential holds it to that.
//
// A value is a *string (tString reads it), int64, float64, bool,
// time.Time, *tTable or *tArray, whichever reader built it; plain turns a
// tree into the maps and slices BurntSushi would give.

// tTable is a TOML table with its keys in document order.
type tTable struct {
	kv    []tkv
	small [4]tkv         // kv's first backing array: one allocation per small table
	idx   map[string]int // built once a table grows past a few keys
	kind  uint8
	// sect is the section (header or inline table) whose dotted keys
	// created the table, for kind tDotted.
	sect int
}

// How a table came to exist; it decides what may still define it.
const (
	tImplicit = iota // an intermediate of a [a.b.c] header path
	tHeader          // defined by a [header]
	tElem            // an element of a [[header]] array
	tDotted          // created by a dotted key
	tInline          // an inline table, or the conversion of BurntSushi's
)

// tArray is a TOML array; tables marks one made by [[headers]].
type tArray struct {
	elems  []any
	tables bool
}

// tkv is one key and its value.
type tkv struct {
	k string
	v any
}

func (t *tTable) get(k string) (any, bool) {
	if t.idx != nil {
		i, ok := t.idx[k]
		if !ok {
			return nil, false
		}
		return t.kv[i].v, true
	}
	for i := range t.kv {
		if t.kv[i].k == k {
			return t.kv[i].v, true
		}
	}
	return nil, false
}

func (t *tTable) set(k string, v any) {
	if t.kv == nil {
		t.kv = t.small[:0]
	}
	t.kv = append(t.kv, tkv{k, v})
	if t.idx != nil {
		t.idx[k] = len(t.kv) - 1
	} else if len(t.kv) > 16 {
		t.idx = make(map[string]int, 2*len(t.kv))
		for i, e := range t.kv {
			t.idx[e.k] = i
		}
	}
}

// tparser is the fast reader's state; s is the whole document.
type tparser struct {
	s     string
	i     int
	root  *tTable
	sect  int // current section id
	nsect int
	keys  []string // scratch for a dotted key
	strs  []string // the slab string values are carved from (str)
	tabs  []tTable // and tables (table)
}

// table returns a new table of the kind, carved from a slab: a lock has a
// table for every wheel and its hashes.
func (p *tparser) table(kind uint8) *tTable {
	if len(p.tabs) == cap(p.tabs) {
		p.tabs = make([]tTable, 0, 64)
	}
	p.tabs = append(p.tabs, tTable{kind: kind})
	return &p.tabs[len(p.tabs)-1]
}

// A string value is held as a *string carved from a slab, not as a
// string in an interface (which allocates each one): a lock of thousands
// of wheels has tens of thousands of them. tString reads one.
func (p *tparser) str(s string, ok bool) (any, bool) {
	if !ok {
		return nil, false
	}
	if len(p.strs) == cap(p.strs) {
		p.strs = make([]string, 0, 512)
	}
	p.strs = append(p.strs, s)
	return &p.strs[len(p.strs)-1], true
}

// tString is a decoded value as a string, and whether it is one.
func tString(v any) (string, bool) {
	if p, ok := v.(*string); ok {
		return *p, true
	}
	return "", false
}

// parseTOML reads s with the fast reader; ok is false when it gives up.
func parseTOML(s string) (root *tTable, ok bool) {
	if !utf8.ValidString(s) || strings.HasPrefix(s, "\ufeff") {
		return nil, false
	}
	root = &tTable{kind: tHeader}
	p := &tparser{s: s, root: root}
	cur := root
	for {
		p.ws()
		if p.i >= len(s) {
			return root, true
		}
		switch c := s[p.i]; c {
		case '#', '\n', '\r':
		case '[':
			t, ok := p.header()
			if !ok {
				return nil, false
			}
			cur = t
		default:
			if !p.keyval(cur) {
				return nil, false
			}
		}
		if !p.eol() {
			return nil, false
		}
	}
}

func (p *tparser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// eol consumes optional whitespace, an optional comment and a newline (or
// the end of the document).
func (p *tparser) eol() bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '#' {
		if !p.comment() {
			return false
		}
	}
	if p.i >= len(p.s) {
		return true
	}
	switch p.s[p.i] {
	case '\n':
		p.i++
		return true
	case '\r':
		if p.i+1 < len(p.s) && p.s[p.i+1] == '\n' {
			p.i += 2
			return true
		}
	}
	return false
}

// comment skips a comment up to (not including) its newline.
func (p *tparser) comment() bool {
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\n' || c == '\r' {
			return true
		}
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
		p.i++
	}
	return true
}

// wsnl skips whitespace, newlines and comments (inside arrays).
func (p *tparser) wsnl() bool {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n':
			p.i++
		case '\r':
			if p.i+1 >= len(p.s) || p.s[p.i+1] != '\n' {
				return false
			}
			p.i += 2
		case '#':
			if !p.comment() {
				return false
			}
		default:
			return true
		}
	}
	return true
}

// dottedKey reads a key into p.keys.
func (p *tparser) dottedKey() bool {
	p.keys = p.keys[:0]
	for {
		k, ok := p.simpleKey()
		if !ok {
			return false
		}
		p.keys = append(p.keys, k)
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '.' {
			return true
		}
		p.i++
		p.ws()
	}
}

func (p *tparser) simpleKey() (string, bool) {
	if p.i >= len(p.s) {
		return "", false
	}
	var k string
	var ok bool
	switch p.s[p.i] {
	case '"':
		k, ok = p.basicString()
	case '\'':
		k, ok = p.literalString()
	default:
		j := p.i
		for j < len(p.s) && isBare(p.s[j]) {
			j++
		}
		k, ok = p.s[p.i:j], j > p.i
		p.i = j
	}
	return k, ok && k != ""
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// header reads [a.b] or [[a.b]] and returns the table that follows.
func (p *tparser) header() (*tTable, bool) {
	p.i++
	array := p.i < len(p.s) && p.s[p.i] == '['
	if array {
		p.i++
	}
	p.ws()
	if !p.dottedKey() {
		return nil, false
	}
	if !strings.HasPrefix(p.s[p.i:], "]") || array && !strings.HasPrefix(p.s[p.i:], "]]") {
		return nil, false
	}
	p.i++
	if array {
		p.i++
	}
	p.nsect++
	p.sect = p.nsect
	t := p.root
	keys := p.keys
	for _, k := range keys[:len(keys)-1] {
		v, ok := t.get(k)
		if !ok {
			nt := p.table(tImplicit)
			t.set(k, nt)
			t = nt
			continue
		}
		switch v := v.(type) {
		case *tTable:
			if v.kind == tDotted || v.kind == tInline {
				return nil, false
			}
			t = v
		case *tArray:
			if !v.tables || len(v.elems) == 0 {
				return nil, false
			}
			t = v.elems[len(v.elems)-1].(*tTable)
		default:
			return nil, false
		}
	}
	last := keys[len(keys)-1]
	v, exists := t.get(last)
	if array {
		nt := p.table(tElem)
		if !exists {
			t.set(last, &tArray{elems: []any{nt}, tables: true})
			return nt, true
		}
		a, ok := v.(*tArray)
		if !ok || !a.tables {
			return nil, false
		}
		a.elems = append(a.elems, nt)
		return nt, true
	}
	if !exists {
		nt := p.table(tHeader)
		t.set(last, nt)
		return nt, true
	}
	if nt, ok := v.(*tTable); ok && nt.kind == tImplicit {
		nt.kind = tHeader
		return nt, true
	}
	return nil, false
}

// keyval reads key = value into t (the current section's table).
func (p *tparser) keyval(t *tTable) bool {
	if !p.dottedKey() {
		return false
	}
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '=' {
		return false
	}
	p.i++
	p.ws()
	// The value may contain inline tables that reuse p.keys: copy the key
	// path out first (dotted keys are rare; the common case is one part).
	var k0 string
	var more []string
	k0 = p.keys[0]
	if len(p.keys) > 1 {
		more = append([]string(nil), p.keys[1:]...)
	}
	sect := p.sect
	v, ok := p.value()
	if !ok {
		return false
	}
	return p.place(t, sect, k0, more, v)
}

// place sets t.k0.more… = v, creating dotted tables of section sect.
func (p *tparser) place(t *tTable, sect int, k0 string, more []string, v any) bool {
	path := k0
	for i := 0; ; i++ {
		if i == len(more) {
			if _, dup := t.get(path); dup {
				return false
			}
			t.set(path, v)
			return true
		}
		x, ok := t.get(path)
		if !ok {
			nt := p.table(tDotted)
			nt.sect = sect
			t.set(path, nt)
			t = nt
		} else if nt, isT := x.(*tTable); isT && nt.kind == tDotted && nt.sect == sect {
			t = nt
		} else {
			return false
		}
		path = more[i]
	}
}

// value reads one value.
func (p *tparser) value() (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"':
		return p.str(p.basicString())
	case c == '\'':
		return p.str(p.literalString())
	case c == '[':
		return p.array()
	case c == '{':
		return p.inlineTable()
	case c == 't':
		if strings.HasPrefix(p.s[p.i:], "true") {
			p.i += 4
			return true, p.delim()
		}
	case c == 'f':
		if strings.HasPrefix(p.s[p.i:], "false") {
			p.i += 5
			return false, p.delim()
		}
	case c >= '0' && c <= '9' || c == '+' || c == '-':
		return p.numberOrDate()
	}
	return nil, false
}

// delim reports whether a value ends here: what may follow a value.
func (p *tparser) delim() bool {
	if p.i >= len(p.s) {
		return true
	}
	switch p.s[p.i] {
	case ' ', '\t', '\n', '\r', '#', ',', ']', '}':
		return true
	}
	return false
}

func (p *tparser) numberOrDate() (any, bool) {
	j := p.i
	for j < len(p.s) && (isBare(p.s[j]) || p.s[j] == '.' || p.s[j] == ':' || p.s[j] == '+') {
		j++
	}
	tok := p.s[p.i:j]
	p.i = j
	if !p.delim() {
		return nil, false
	}
	if isDecimal(tok) {
		n, err := strconv.ParseInt(strings.ReplaceAll(tok, "_", ""), 10, 64)
		return n, err == nil
	}
	if isOffsetDatetime(tok) {
		t, err := time.ParseInLocation(time.RFC3339Nano, tok, time.Local)
		return t, err == nil
	}
	return nil, false
}

// isDecimal matches [+-]?(0|[1-9](_?[0-9])*).
func isDecimal(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "0" {
		return true
	}
	if s == "" || s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
		case c == '_' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
		default:
			return false
		}
	}
	return true
}

// isOffsetDatetime matches YYYY-MM-DDTHH:MM:SS(.d+)?(Z|[+-]HH:MM).
func isOffsetDatetime(s string) bool {
	const shape = "0000-00-00T00:00:00"
	if len(s) < len(shape)+1 {
		return false
	}
	for i := 0; i < len(shape); i++ {
		if shape[i] == '0' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != shape[i] {
			return false
		}
	}
	r := s[len(shape):]
	if r[0] == '.' {
		n := 1
		for n < len(r) && r[n] >= '0' && r[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return false
		}
		r = r[n:]
	}
	if r == "Z" {
		return true
	}
	return len(r) == 6 && (r[0] == '+' || r[0] == '-') && isDigit(r[1]) && isDigit(r[2]) && r[3] == ':' && isDigit(r[4]) && isDigit(r[5])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// stringChar reports whether c may appear raw in a single-line string.
func stringChar(c byte) bool { return c >= 0x20 && c != 0x7f || c == '\t' }

func (p *tparser) basicString() (string, bool) {
	if strings.HasPrefix(p.s[p.i:], `"""`) {
		return "", false
	}
	p.i++
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, true
		}
		if c == '\\' {
			return p.escaped(start)
		}
		if !stringChar(c) {
			return "", false
		}
		p.i++
	}
	return "", false
}

// escaped finishes a basic string that has an escape, from start.
func (p *tparser) escaped(start int) (string, bool) {
	var b strings.Builder
	b.WriteString(p.s[start:p.i])
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), true
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'u', 'U':
				n := 4
				if e == 'U' {
					n = 8
				}
				if p.i+n > len(p.s) {
					return "", false
				}
				h := p.s[p.i : p.i+n]
				for i := 0; i < n; i++ {
					if !isHex(h[i]) {
						return "", false
					}
				}
				r, err := strconv.ParseUint(h, 16, 32)
				if err != nil || r > utf8.MaxRune || r >= 0xd800 && r < 0xe000 {
					return "", false
				}
				b.WriteRune(rune(r))
				p.i += n
			default:
				return "", false
			}
		case stringChar(c):
			b.WriteByte(c)
			p.i++
		default:
			return "", false
		}
	}
	return "", false
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func (p *tparser) literalString() (string, bool) {
	if strings.HasPrefix(p.s[p.i:], "'''") {
		return "", false
	}
	p.i++
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\'' {
			s := p.s[start:p.i]
			p.i++
			return s, true
		}
		if !stringChar(c) {
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *tparser) array() (any, bool) {
	p.i++
	a := &tArray{}
	for {
		if !p.wsnl() || p.i >= len(p.s) {
			return nil, false
		}
		if p.s[p.i] == ']' {
			p.i++
			return a, true
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		a.elems = append(a.elems, v)
		if !p.wsnl() || p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, true
		default:
			return nil, false
		}
	}
}

func (p *tparser) inlineTable() (any, bool) {
	p.i++
	saved := p.sect
	p.nsect++
	p.sect = p.nsect
	t, ok := p.inlineBody()
	p.sect = saved
	return t, ok
}

func (p *tparser) inlineBody() (any, bool) {
	t := p.table(tInline)
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return t, true
	}
	for {
		p.ws()
		if !p.keyval(t) {
			return nil, false
		}
		p.ws()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return t, true
		default:
			return nil, false
		}
	}
}

// fromBurntSushi converts what BurntSushi/toml decodes into an any to the
// fast reader's shape, keys sorted (a Go map has no order).
func fromBurntSushi(v any) any {
	switch v := v.(type) {
	case map[string]any:
		t := &tTable{kind: tInline}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.set(k, fromBurntSushi(v[k]))
		}
		return t
	case []map[string]any:
		a := &tArray{elems: make([]any, len(v)), tables: true}
		for i, m := range v {
			a.elems[i] = fromBurntSushi(m)
		}
		return a
	case []any:
		a := &tArray{elems: make([]any, len(v))}
		for i, x := range v {
			a.elems[i] = fromBurntSushi(x)
		}
		return a
	case string:
		return &v
	}
	return v
}

// decodeTOML reads a document: the fast reader, else BurntSushi/toml.
func decodeTOML(s string) (*tTable, error) {
	if t, ok := parseTOML(s); ok {
		return t, nil
	}
	var m map[string]any
	if _, err := toml.Decode(s, &m); err != nil {
		return nil, err
	}
	return fromBurntSushi(m).(*tTable), nil
}

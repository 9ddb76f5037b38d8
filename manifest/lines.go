package manifest

import (
	"strconv"
	"strings"
)

// lineIndex maps a key path to the line (1-based) where the key is written,
// so that a refusal can name both. BurntSushi/toml keeps key positions to
// itself and, for arrays of tables, keeps only the last element's; this
// small scanner walks the (already parsed, hence valid) document again.
//
// Paths are written as "budgets.timeout_ms", "entrypoints[1].interface.id",
// "secrets[2]"; a table header's own line is recorded under the table's
// path ("entrypoints[1]", "budgets").
type lineIndex map[string]int

// line returns the line of path, else of its closest recorded ancestor,
// else 1.
func (ix lineIndex) line(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if n, ok := ix[p]; ok {
			return n
		}
	}
	return 1
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

type scanner struct {
	s    string
	i    int
	line int
	ix   lineIndex
	aot  map[string]int // array-of-tables path (no index) → elements seen
}

// indexLines scans a valid TOML document. On input it does not understand
// it stops early; the index then holds what was seen so far, and lookups
// fall back to an ancestor's line.
func indexLines(doc string) lineIndex {
	sc := &scanner{s: doc, line: 1, ix: lineIndex{}, aot: map[string]int{}}
	sc.document()
	return sc.ix
}

func (sc *scanner) eof() bool { return sc.i >= len(sc.s) }

func (sc *scanner) peek() byte {
	if sc.eof() {
		return 0
	}
	return sc.s[sc.i]
}

func (sc *scanner) advance(n int) {
	for k := 0; k < n && sc.i < len(sc.s); k++ {
		if sc.s[sc.i] == '\n' {
			sc.line++
		}
		sc.i++
	}
}

// space skips spaces and tabs; with newlines, also newlines and comments.
func (sc *scanner) space(newlines bool) {
	for !sc.eof() {
		switch c := sc.peek(); {
		case c == ' ' || c == '\t' || c == '\r':
			sc.advance(1)
		case newlines && c == '\n':
			sc.advance(1)
		case newlines && c == '#':
			sc.comment()
		default:
			return
		}
	}
}

func (sc *scanner) comment() {
	for !sc.eof() && sc.peek() != '\n' {
		sc.advance(1)
	}
}

func (sc *scanner) document() {
	table := ""
	for {
		sc.space(true)
		if sc.eof() {
			return
		}
		start := sc.i
		if sc.peek() == '[' {
			line := sc.line
			array := strings.HasPrefix(sc.s[sc.i:], "[[")
			if array {
				sc.advance(2)
			} else {
				sc.advance(1)
			}
			sc.space(false)
			parts, ok := sc.key()
			if !ok {
				return
			}
			sc.space(false)
			if array {
				if !strings.HasPrefix(sc.s[sc.i:], "]]") {
					return
				}
				sc.advance(2)
			} else {
				if sc.peek() != ']' {
					return
				}
				sc.advance(1)
			}
			table = sc.resolve(parts, array)
			if _, seen := sc.ix[table]; !seen {
				sc.ix[table] = line
			}
			if array {
				// The array itself is written where its first header is:
				// a key about it ("[[entrypoint]]", an unknown key) was
				// reported at line 1.
				plain := table[:strings.LastIndexByte(table, '[')]
				if _, seen := sc.ix[plain]; !seen {
					sc.ix[plain] = line
				}
			}
		} else {
			if !sc.keyValue(table) {
				return
			}
		}
		sc.space(false)
		if sc.peek() == '#' {
			sc.comment()
		}
		if sc.i == start { // no progress: give up rather than loop
			return
		}
	}
}

// resolve turns a header's key parts into a path, indexing arrays of
// tables: "[[entrypoints]]" twice gives entrypoints[0] then entrypoints[1];
// "[entrypoints.interface]" then refers to the last element.
func (sc *scanner) resolve(parts []string, array bool) string {
	path := ""
	for k, p := range parts {
		plain := joinPath(path, p)
		last := k == len(parts)-1
		if last && array {
			n := sc.aot[plain]
			sc.aot[plain] = n + 1
			return plain + "[" + strconv.Itoa(n) + "]"
		}
		if n, ok := sc.aot[plain]; ok && n > 0 {
			path = plain + "[" + strconv.Itoa(n-1) + "]"
		} else {
			path = plain
		}
	}
	return path
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// keyValue reads `key = value` under table, recording the key's line.
func (sc *scanner) keyValue(table string) bool {
	line := sc.line
	parts, ok := sc.key()
	if !ok {
		return false
	}
	path := table
	for _, p := range parts {
		path = joinPath(path, p)
		if _, seen := sc.ix[path]; !seen {
			sc.ix[path] = line
		}
	}
	sc.space(false)
	if sc.peek() != '=' {
		return false
	}
	sc.advance(1)
	sc.space(false)
	return sc.value(path)
}

// key reads a dotted key: bare, "basic" or 'literal' parts.
func (sc *scanner) key() ([]string, bool) {
	var parts []string
	for {
		sc.space(false)
		var p string
		switch c := sc.peek(); {
		case c == '"':
			s, ok := sc.basicString()
			if !ok {
				return nil, false
			}
			p = s
		case c == '\'':
			s, ok := sc.literalString()
			if !ok {
				return nil, false
			}
			p = s
		default:
			j := sc.i
			for j < len(sc.s) && isBare(sc.s[j]) {
				j++
			}
			if j == sc.i {
				return nil, false
			}
			p = sc.s[sc.i:j]
			sc.advance(j - sc.i)
		}
		parts = append(parts, p)
		sc.space(false)
		if sc.peek() != '.' {
			return parts, true
		}
		sc.advance(1)
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value, recording the lines of array elements
// (path[i]) and of inline tables' keys.
func (sc *scanner) value(path string) bool {
	switch c := sc.peek(); {
	case c == '"':
		if strings.HasPrefix(sc.s[sc.i:], `"""`) {
			return sc.multiline(`"""`, true)
		}
		_, ok := sc.basicString()
		return ok
	case c == '\'':
		if strings.HasPrefix(sc.s[sc.i:], `'''`) {
			return sc.multiline(`'''`, false)
		}
		_, ok := sc.literalString()
		return ok
	case c == '[':
		sc.advance(1)
		for n := 0; ; n++ {
			sc.space(true)
			if sc.peek() == ']' {
				sc.advance(1)
				return true
			}
			el := path + "[" + strconv.Itoa(n) + "]"
			if _, seen := sc.ix[el]; !seen {
				sc.ix[el] = sc.line
			}
			if !sc.value(el) {
				return false
			}
			sc.space(true)
			switch sc.peek() {
			case ',':
				sc.advance(1)
			case ']':
				sc.advance(1)
				return true
			default:
				return false
			}
		}
	case c == '{':
		sc.advance(1)
		for {
			sc.space(true) // TOML 1.1 allows newlines in inline tables
			if sc.peek() == '}' {
				sc.advance(1)
				return true
			}
			if !sc.keyValue(path) {
				return false
			}
			sc.space(true)
			switch sc.peek() {
			case ',':
				sc.advance(1)
			case '}':
				sc.advance(1)
				return true
			default:
				return false
			}
		}
	default:
		// Numbers, booleans, dates: up to a delimiter. A date-time may
		// hold one space ("1979-05-27 07:32:00"): the next token is then
		// not a delimiter, so it is taken as part of the value.
		j := sc.i
		for j < len(sc.s) {
			b := sc.s[j]
			if b == ',' || b == ']' || b == '}' || b == '#' || b == '\n' || b == '\r' {
				break
			}
			if b == ' ' || b == '\t' {
				k := j
				for k < len(sc.s) && (sc.s[k] == ' ' || sc.s[k] == '\t') {
					k++
				}
				if k < len(sc.s) && sc.s[k] >= '0' && sc.s[k] <= '9' && j > sc.i && sc.s[j-1] >= '0' && sc.s[j-1] <= '9' && strings.Count(sc.s[sc.i:j], "-") == 2 {
					j = k
					continue
				}
				break
			}
			j++
		}
		if j == sc.i {
			return false
		}
		sc.advance(j - sc.i)
		return true
	}
}

// basicString reads "…" and returns its content with the simple escapes
// decoded (enough to name a key; values are BurntSushi/toml's job).
func (sc *scanner) basicString() (string, bool) {
	sc.advance(1)
	var b strings.Builder
	for !sc.eof() {
		c := sc.peek()
		switch c {
		case '"':
			sc.advance(1)
			return b.String(), true
		case '\n':
			return "", false
		case '\\':
			if sc.i+1 >= len(sc.s) {
				return "", false
			}
			e := sc.s[sc.i+1]
			switch e {
			case '"', '\\':
				b.WriteByte(e)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			sc.advance(2)
		default:
			b.WriteByte(c)
			sc.advance(1)
		}
	}
	return "", false
}

func (sc *scanner) literalString() (string, bool) {
	sc.advance(1)
	j := strings.IndexAny(sc.s[sc.i:], "'\n")
	if j < 0 || sc.s[sc.i+j] != '\'' {
		return "", false
	}
	s := sc.s[sc.i : sc.i+j]
	sc.advance(j + 1)
	return s, true
}

// multiline skips a multi-line basic or literal string (delim is three
// quotes; up to two extra quotes may end it, as TOML allows).
func (sc *scanner) multiline(delim string, escapes bool) bool {
	sc.advance(3)
	for !sc.eof() {
		if escapes && sc.peek() == '\\' {
			sc.advance(2)
			continue
		}
		if strings.HasPrefix(sc.s[sc.i:], delim) {
			sc.advance(3)
			for k := 0; k < 2 && sc.peek() == delim[0]; k++ {
				sc.advance(1)
			}
			return true
		}
		sc.advance(1)
	}
	return false
}

package marker

import (
	"strings"
	"unicode/utf8"
)

// pyUnquote evaluates the body of a quoted marker string as Python's
// ast.literal_eval does for a non-raw str literal (pypa/packaging's
// behaviour): backslash escapes are processed, a raw line break or NUL is
// an error. On error it returns the byte offset in body and a reason.
// Deliberate differences: \N{...} and escapes that make a lone surrogate
// are refused.
func pyUnquote(body string) (string, int, string) {
	if strings.IndexByte(body, '\\') < 0 {
		if i := strings.IndexAny(body, "\n\r\x00"); i >= 0 {
			return "", i, lineOrNul(body[i])
		}
		return body, 0, ""
	}
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch c {
		case '\n', '\r', 0:
			return "", i, lineOrNul(c)
		case '\\':
		default:
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", i, "unterminated string (the closing quote is escaped)"
		}
		e := body[i+1]
		switch e {
		case '\n':
			i += 2
		case '\r':
			i += 2
			if i < len(body) && body[i] == '\n' {
				i++
			}
		case '\\', '\'', '"', 'a', 'b', 'f', 'n', 'r', 't', 'v':
			b.WriteByte(simpleEscapes[e])
			i += 2
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j, n := i+1, rune(0)
			for j < len(body) && j < i+4 && body[j] >= '0' && body[j] <= '7' {
				n = n*8 + rune(body[j]-'0')
				j++
			}
			b.WriteRune(n)
			i = j
		case 'x', 'u', 'U':
			width := 2
			switch e {
			case 'u':
				width = 4
			case 'U':
				width = 8
			}
			if i+2+width > len(body) {
				return "", i, "truncated \\" + string(e) + " escape"
			}
			n := rune(0)
			for k := i + 2; k < i+2+width; k++ {
				d, ok := hexVal(body[k])
				if !ok {
					return "", i, "truncated \\" + string(e) + " escape"
				}
				n = n<<4 | rune(d)
			}
			if n > utf8.MaxRune {
				return "", i, "illegal Unicode character"
			}
			if n >= 0xd800 && n <= 0xdfff {
				return "", i, "lone surrogate escape (not representable)"
			}
			b.WriteRune(n)
			i += 2 + width
		case 'N':
			return "", i, "\\N{...} escapes are not supported"
		default:
			// Python keeps unknown escapes as written (with a warning).
			b.WriteByte('\\')
			i++
		}
	}
	return b.String(), 0, ""
}

func lineOrNul(c byte) string {
	if c == 0 {
		return "NUL byte in string"
	}
	return "line break in string"
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// pyQuote writes a value as a marker string that Parse reads back to the
// same value: "v" as pypa/packaging does; 'v' when v holds a double quote;
// Python escapes when v holds both quotes, a backslash, a line break or a
// NUL (pypa/packaging writes those unescaped, which does not read back).
func pyQuote(v string) string {
	dq, sq := strings.IndexByte(v, '"') >= 0, strings.IndexByte(v, '\'') >= 0
	if !strings.ContainsAny(v, "\\\n\r\x00") && !(dq && sq) {
		if dq {
			return "'" + v + "'"
		}
		return "\"" + v + "\""
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\x22`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\x00`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// simpleEscapes maps the letter after a backslash to the byte Python's
// string literals give it, for the one-character escapes.
var simpleEscapes = [256]byte{'\\': '\\', '\'': '\'', '"': '"', 'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}

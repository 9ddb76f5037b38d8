// Package pep503 owns the one normalization of Python project names
// (PEP 503, which PEP 685 applies to extras and dependency groups too):
// every run of "-", "_" and "." replaced by one "-", then lower case as
// Python's str.lower() (the reference implementation's) does. Every
// package that compares names (the lock, wheel file names, the index
// client, markers) calls Normalize; none has its own.
package pep503

import (
	"strings"
	"unicode/utf8"
)

// Normalize returns the PEP 503 normalized form of name. It does not
// validate the name. A name already normalized is returned as is (no
// allocation).
func Normalize(name string) string {
	clean := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= utf8.RuneSelf, c >= 'A' && c <= 'Z', c == '_', c == '.':
			clean = false
		case c == '-' && i+1 < len(name) && (name[i+1] == '-' || name[i+1] == '_' || name[i+1] == '.'):
			clean = false
		}
		if !clean {
			break
		}
	}
	if clean {
		return name
	}
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); {
		c := name[i]
		if c == '-' || c == '_' || c == '.' {
			for i < len(name) && (name[i] == '-' || name[i] == '_' || name[i] == '.') {
				i++
			}
			b.WriteByte('-')
			continue
		}
		b.WriteByte(c)
		i++
	}
	return pyLower(b.String())
}

// Package strictjson decodes the JSON documents cruxprov reads back from
// its own store and state (seals, the registry's pins, trust, history,
// journal and floors) without the two ways encoding/json lets one
// document say two things: a key given twice in one object, of which the
// decoder keeps the last and drops the first without a word, and two keys
// that differ only in case naming one struct field ("path" and "Path"),
// of which it keeps whichever comes last. Another reader of the same
// bytes (a reviewer's jq, an implementation following RFC 8259's advice
// that names be unique) may take the other value, so such a document is
// refused, not read. A lone key in another case than its field's tag is
// still read, as encoding/json reads it: seals have always written the
// interpreter's "Path" and "Version" for the fields tagged "path" and
// "version".
//
// CheckKeys alone, with no type, is the executor's check that a call's
// input has no key twice (invoke), which the harness would refuse.
//
// It owns nothing else: the documents' shapes, formats and refusals are
// their packages'.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// maxDepth bounds the nesting the key check follows, as encoding/json's
// own decoder does (10,000); deeper input is refused before decoding.
const maxDepth = 10000

// Decode decodes the JSON text b, one value with nothing after it, into
// v (a non-nil pointer), after checking its keys as the package doc
// says. With unknown false, a key that names no field of a struct is an
// error too (json.Decoder.DisallowUnknownFields).
func Decode(b []byte, v any, unknown bool) error {
	if err := CheckKeys(b, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if !unknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Not dec.More(), which is false before a stray "}" or "]": "{} }"
	// was read as the document "{}".
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0 {
		return ErrTrailing
	}
	return nil
}

// CheckKeys reports the first object in the JSON text b that has a key
// twice, or two keys that decoding into t (the type Decode is given)
// would bind to one struct field. Objects decoded into maps, interfaces
// or types with their own UnmarshalJSON are checked for repeated keys
// alone: their keys are case-sensitive. Malformed JSON is left for the
// decoder to report, with its offset.
func CheckKeys(b []byte, t reflect.Type) error {
	sc := scanner{b: b}
	err := sc.value(t, nil, 0)
	var ke *KeyError
	if errors.As(err, &ke) || errors.Is(err, ErrTooDeep) {
		return err
	}
	return nil // a syntax error: the decode that follows reports it
}

// ErrTrailing is Decode's error for a document with more after its value.
var ErrTrailing = errors.New("data after the JSON value")

// ErrTooDeep is CheckKeys's error for input nested deeper than it follows.
var ErrTooDeep = fmt.Errorf("nested more than %d deep", maxDepth)

// KeyError is a document refused for its keys: an object that has Key
// twice, or (Field set) the keys First and Key, which both name the
// struct field Field.
type KeyError struct {
	// At is the object's place: "" for the document, else a path of
	// members and indexes (".interpreter", ".list[1]").
	At                string
	Key, First, Field string
}

func (e *KeyError) Error() string {
	where := "the document"
	if e.At != "" {
		where = "the object at " + strings.TrimPrefix(e.At, ".")
	}
	if e.Field == "" {
		return fmt.Sprintf("%s has the key %q twice (a reader keeps one and drops the other)", where, e.Key)
	}
	return fmt.Sprintf("%s has the keys %q and %q, which name one field %q (a reader keeps one and drops the other)", where, e.First, e.Key, e.Field)
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// errSyntax is the scanner's word for JSON it cannot read: CheckKeys
// leaves it to the decoder, which says where and why.
var errSyntax = errors.New("malformed JSON")

// scanner reads the structure of a JSON text: objects' keys, decoded, and
// where each value begins and ends, without decoding the values. It is
// what every verify and run pays on the pin, the trust state, the floor
// and the seal, so it allocates little: a key without an escape is
// compared as the bytes it is (encoding/json's Token allocated every key,
// string and number, and made the pin's check cost half of the pin's
// parse again). It trusts the decoder after it to refuse malformed input.
type scanner struct {
	b []byte
	i int
}

// place is where a value stands, for errors: built only when one is made.
type place struct {
	up    *place
	key   []byte // the member's key, or
	index int    // for an array's element, its index (-1 for a member)
}

func (p *place) String() string {
	if p == nil {
		return ""
	}
	if p.index >= 0 {
		return p.up.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return p.up.String() + "." + string(p.key)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// child reads the value of a member (key) or an element (index) of the
// container at: a place is made only for a value that holds keys.
func (s *scanner) child(t reflect.Type, at *place, key []byte, index, depth int) error {
	s.ws()
	if s.i < len(s.b) && (s.b[s.i] == '{' || s.b[s.i] == '[') {
		return s.value(t, &place{up: at, key: key, index: index}, depth+1)
	}
	return s.value(t, nil, depth+1)
}

// value reads one value, which decoding into t would fill.
func (s *scanner) value(t reflect.Type, at *place, depth int) error {
	if depth > maxDepth {
		return ErrTooDeep
	}
	s.ws()
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i] {
	case '{':
		return s.object(shape(t), at, depth)
	case '[':
		return s.array(shape(t), at, depth)
	case '"':
		_, _, err := s.str()
		return err
	}
	start := s.i // a number, true, false or null
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			if s.i == start {
				return errSyntax
			}
			return nil
		}
		s.i++
	}
	return nil
}

// str reads a string: its bytes as they stand between the quotes, and
// whether they hold an escape (then they are not yet its value).
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	s.i++ // the opening quote
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		}
		s.i++
	}
	return nil, false, errSyntax
}

func (s *scanner) array(t reflect.Type, at *place, depth int) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	s.i++ // [
	for n := 0; ; n++ {
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' && n == 0 {
			s.i++
			return nil
		}
		if err := s.child(elem, at, nil, n, depth); err != nil {
			return err
		}
		if done, err := s.after(']'); done || err != nil {
			return err
		}
	}
}

// after reads what follows a member of an array or object, after the
// white space: a comma (another member comes, done false) or the close
// that ends it (done true); anything else is a syntax error.
func (s *scanner) after(close byte) (done bool, err error) {
	s.ws()
	if s.i >= len(s.b) {
		return false, errSyntax
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return false, nil
	case close:
		s.i++
		return true, nil
	}
	return false, errSyntax
}

// smallObject is how many keys an object's are compared one by one
// before they go into a map (a call's input may have thousands).
const smallObject = 16

func (s *scanner) object(t reflect.Type, at *place, depth int) error {
	var fields []field
	var elem reflect.Type
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	var keys [][]byte // the keys so far, decoded
	var many map[string]bool
	var bound []int // per field, the index in keys of the key bound to it, +1
	s.i++           // {
	for n := 0; ; n++ {
		s.ws()
		if s.i >= len(s.b) {
			return errSyntax
		}
		if s.b[s.i] == '}' && n == 0 {
			s.i++
			return nil
		}
		if s.b[s.i] != '"' {
			return errSyntax
		}
		start := s.i
		k, escaped, err := s.str()
		if err != nil {
			return err
		}
		// A key is compared as encoding/json decodes it: escapes
		// resolved, bytes that are not UTF-8 read as U+FFFD (two keys
		// differing only there are one key to it).
		if escaped || !utf8.Valid(k) {
			var d string
			if err := json.Unmarshal(s.b[start:s.i], &d); err != nil {
				return errSyntax
			}
			k = []byte(d)
		}
		if many != nil {
			if many[string(k)] {
				return &KeyError{At: at.String(), Key: string(k)}
			}
			many[string(k)] = true
		} else {
			for _, x := range keys {
				if bytes.Equal(x, k) {
					return &KeyError{At: at.String(), Key: string(k)}
				}
			}
			if len(keys) == smallObject {
				many = make(map[string]bool, 2*smallObject)
				for _, x := range keys {
					many[string(x)] = true
				}
				many[string(k)] = true
			}
		}
		keys = append(keys, k)
		vt := elem
		if fields != nil {
			vt = nil
			if f := match(fields, k); f >= 0 {
				if bound == nil {
					bound = make([]int, len(fields))
				}
				if bound[f] != 0 {
					return &KeyError{At: at.String(), Key: string(k), First: string(keys[bound[f]-1]), Field: fields[f].name}
				}
				bound[f] = len(keys)
				vt = fields[f].typ
			}
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errSyntax
		}
		s.i++
		if err := s.child(vt, at, k, -1, depth); err != nil {
			return err
		}
		if done, err := s.after('}'); done || err != nil {
			return err
		}
	}
}

// shape is the type whose JSON shape t's value takes: pointers followed,
// nil where the decoder does not go by t's fields or elements (its own
// UnmarshalJSON, an interface, or no type at all).
func shape(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// field is one JSON member of a struct type, as encoding/json names it.
type field struct {
	name string
	typ  reflect.Type
}

// match is the index of the field encoding/json binds key to: its exact
// name, else the first that equals it but for case; -1 for none.
func match(fields []field, key []byte) int {
	for i, f := range fields {
		if f.name == string(key) {
			return i
		}
	}
	for i, f := range fields {
		if strings.EqualFold(f.name, string(key)) {
			return i
		}
	}
	return -1
}

var fieldCache sync.Map // reflect.Type → []field

// fieldsOf lists t's JSON members: exported fields under their tag's
// name (or their own), "-" left out, untagged embedded structs' members
// promoted, as encoding/json does (a name both levels have is the outer
// one's; the rare ties encoding/json drops are kept here, which can only
// refuse more).
func fieldsOf(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	var out []field
	have := map[string]bool{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, field{name, sf.Type})
		have[name] = true
	}
	for _, et := range embedded {
		for _, f := range fieldsOf(et) {
			if !have[f.name] {
				out = append(out, f)
				have[f.name] = true
			}
		}
	}
	fieldCache.Store(t, out)
	return out
}

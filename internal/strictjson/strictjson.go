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
	"strings"
	"sync"
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
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := walk(dec, t, "", 0)
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

// walk reads one value from dec, which decoding into t would fill; at
// names it for errors ("" for the document).
func walk(dec *json.Decoder, t reflect.Type, at string, depth int) error {
	if depth > maxDepth {
		return ErrTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	t = shape(t)
	switch d {
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", at, i), depth+1); err != nil {
				return err
			}
		}
	case '{':
		var fields []field
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = fieldsOf(t)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		seen := map[string]bool{}
		bound := map[int]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			if seen[k] {
				return &KeyError{At: at, Key: k}
			}
			seen[k] = true
			vt := elem
			if fields != nil {
				vt = nil
				if i := match(fields, k); i >= 0 {
					if prev, dup := bound[i]; dup {
						return &KeyError{At: at, Key: k, First: prev, Field: fields[i].name}
					}
					bound[i] = k
					vt = fields[i].typ
				}
			}
			if err := walk(dec, vt, at+"."+k, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
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
func match(fields []field, key string) int {
	for i, f := range fields {
		if f.name == key {
			return i
		}
	}
	for i, f := range fields {
		if strings.EqualFold(f.name, key) {
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

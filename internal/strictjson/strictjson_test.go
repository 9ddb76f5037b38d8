package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

type embedded struct {
	inner
	Size int64 `json:"size"`
}

type withDigest struct{ v string }

func (d *withDigest) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &d.v) }

type doc struct {
	Format  string            `json:"format"`
	Inner   *inner            `json:"inner"`
	List    []inner           `json:"list"`
	Names   map[string]string `json:"names"`
	Any     any               `json:"any"`
	Raw     json.RawMessage   `json:"raw"`
	Emb     embedded          `json:"emb"`
	Digest  withDigest        `json:"digest"`
	Skipped string            `json:"-"`
	NoTag   string
}

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name, in string
		unknown  bool
		err      string // "" for none
	}{
		{name: "clean", in: `{"format":"x","inner":{"path":"/p","version":"3"},"names":{"a":"1","A":"2"}}`},
		{name: "another case alone is read", in: `{"inner":{"Path":"/p","Version":"3"}}`},
		{name: "untagged field by its name", in: `{"NoTag":"x"}`},
		{name: "a key twice", in: `{"format":"x","format":"y"}`, err: `the document has the key "format" twice`},
		{name: "two cases of one field", in: `{"inner":{"path":"/a","Path":"/b"}}`, err: `the object at inner has the keys "path" and "Path", which name one field "path"`},
		{name: "in an array", in: `{"list":[{"path":"/a"},{"version":"1","VERSION":"2"}]}`, err: `the object at list[1] has the keys "version" and "VERSION"`},
		{name: "a promoted field", in: `{"emb":{"size":1,"Path":"/a","path":"/b"}}`, err: `the object at emb has the keys "Path" and "path"`},
		{name: "a map's keys are its own", in: `{"names":{"k":"1","K":"2"}}`},
		{name: "a map's key twice", in: `{"names":{"k":"1","k":"2"}}`, err: `the object at names has the key "k" twice`},
		{name: "inside an interface", in: `{"any":{"a":{"b":1,"b":2}}}`, err: `the object at any.a has the key "b" twice`},
		{name: "inside raw JSON", in: `{"raw":{"b":1,"b":2}}`, err: `the object at raw has the key "b" twice`},
		{name: "a type with its own decoding", in: `{"digest":"sha256:x"}`},
		{name: "unknown keys, allowed", in: `{"future":{"x":1,"X":2}}`, unknown: true},
		{name: "unknown keys twice, allowed or not", in: `{"future":{"x":1,"x":2}}`, unknown: true, err: `the object at future has the key "x" twice`},
		{name: "unknown key refused", in: `{"future":1}`, err: `unknown field "future"`},
		{name: "an ignored field's key twice", in: `{"Skipped":1,"Skipped":2}`, unknown: true, err: `has the key "Skipped" twice`},
		{name: "data after", in: `{"format":"x"} {}`, err: "data after the JSON value"},
		{name: "a stray close after", in: `{"format":"x"} }`, err: "data after the JSON value"},
		{name: "a stray bracket after", in: "{}\n]", err: "data after the JSON value"},
		{name: "whitespace after", in: "{}\r\n\t "},
		{name: "malformed is the decoder's to say", in: `{"format":"x",}`, err: "invalid character"},
		{name: "not an object", in: `[1,2]`, err: "cannot unmarshal array"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d doc
			err := Decode([]byte(c.in), &d, c.unknown)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Decode(%s) = %v, want no error", c.in, err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Decode(%s) = %v, want an error containing %q", c.in, err, c.err)
			}
		})
	}
}

// TestCaseAloneStillBinds holds the one leniency kept: a seal's
// interpreter written as "Path" fills the field tagged "path".
func TestCaseAloneStillBinds(t *testing.T) {
	var d doc
	if err := Decode([]byte(`{"inner":{"Path":"/usr/bin/python3"}}`), &d, false); err != nil {
		t.Fatal(err)
	}
	if d.Inner == nil || d.Inner.Path != "/usr/bin/python3" {
		t.Fatalf("inner = %+v", d.Inner)
	}
}

func TestTooDeep(t *testing.T) {
	b := strings.Repeat(`{"any":`, maxDepth+2) + "1" + strings.Repeat("}", maxDepth+2)
	var d doc
	if err := Decode([]byte(b), &d, true); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("Decode = %v, want the depth refused", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"format":"x","inner":{"path":"/p"}}`, `{"inner":{"path":"/a","Path":"/b"}}`, `{"names":{"k":1,"k":2}}`, `{"list":[{"version":"1"}]}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d doc
		if err := Decode(b, &d, true); err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		// Accepted: no object in it has a key twice.
		var m any
		if err := CheckKeys(b, nil); err != nil {
			t.Fatalf("accepted into doc, refused as untyped: %v", err)
		}
		_ = json.Unmarshal(b, &m)
	})
}

// tokenKeys is the key check as first written, on encoding/json's Token:
// slow (every key, string and number allocated) but plainly right; the
// scanner must agree with it on every valid JSON text.
func tokenKeys(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(t reflect.Type, at string, depth int) error
	walk = func(t reflect.Type, at string, depth int) error {
		if depth > maxDepth {
			return ErrTooDeep
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		t = shape(t)
		switch d {
		case '[':
			var elem reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			for i := 0; dec.More(); i++ {
				if err := walk(elem, fmt.Sprintf("%s[%d]", at, i), depth+1); err != nil {
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
			seen, bound := map[string]bool{}, map[int]string{}
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
					if i := match(fields, []byte(k)); i >= 0 {
						if prev, dup := bound[i]; dup {
							return &KeyError{At: at, Key: k, First: prev, Field: fields[i].name}
						}
						bound[i] = k
						vt = fields[i].typ
					}
				}
				if err := walk(vt, at+"."+k, depth+1); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token()
		return err
	}
	err := walk(t, "", 0)
	var ke *KeyError
	if errors.As(err, &ke) || errors.Is(err, ErrTooDeep) {
		return err
	}
	return nil
}

// FuzzScannerAgreesWithTokens: on every valid JSON text, into doc or no
// type, CheckKeys says what tokenKeys says, to the letter.
func FuzzScannerAgreesWithTokens(f *testing.F) {
	for _, s := range []string{`{"format":"x","inner":{"path":"/p","Path":"/q"}}`, `{"names":{"k":1,"k":2}}`, `{"list":[{"version":"1"},{"VERSION":"1","version":2}]}`,
		`{"a":{"b":[1,{"c":1,"\u0063":2}]}}`, `[{"a":1},{"a":2}]`, `{"":1,"":2}`, `{"any":[[],{},"x\"y",-1.5e3,true,null]}`,
		`{"a1":1,"a2":1,"a3":1,"a4":1,"a5":1,"a6":1,"a7":1,"a8":1,"a9":1,"a10":1,"a11":1,"a12":1,"a13":1,"a14":1,"a15":1,"a16":1,"a17":1,"a3":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		for _, typ := range []reflect.Type{reflect.TypeFor[*doc](), nil} {
			got, want := CheckKeys(b, typ), tokenKeys(b, typ)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("CheckKeys(%q, %v) = %v; tokens say %v", b, typ, got, want)
			}
		}
	})
}

// BenchmarkCheckKeys is the check on a pin-sized document (2.6 KB) into
// its struct: what a verify pays for it, on the pin, the trust state and
// the floor.
func BenchmarkCheckKeys(b *testing.B) {
	var items []string
	for i := range 20 {
		items = append(items, fmt.Sprintf(`{"path":"/usr/lib/python3/site-packages/pkg%02d","version":"1.%d.0"}`, i, i))
	}
	d := []byte(`{"format":"cruxible.pin/v1","inner":{"path":"/usr/bin/python3","version":"3.11"},"list":[` + strings.Join(items, ",") + `],"names":{"a":"b","c":"d"},"NoTag":"x"}`)
	typ := reflect.TypeFor[*doc]()
	b.SetBytes(int64(len(d)))
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			if err := CheckKeys(d, typ); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tokens", func(b *testing.B) {
		for b.Loop() {
			if err := tokenKeys(d, typ); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestKeysNotUTF8: encoding/json reads a key's bytes that are not UTF-8
// as U+FFFD, so two keys that differ only there are one key to it (the
// last kept). The scanner compared the raw bytes and passed them; it
// reads such a key as the decoder does (found by
// FuzzScannerAgreesWithTokens).
func TestKeysNotUTF8(t *testing.T) {
	for _, b := range []string{
		"{\"names\":{\"\x8a\":\"a\",\"\x8b\":\"b\"}}",
		"{\"\xff\":1,\"\\ufffd\":2}",
		"{\"\x8a\":{\"k\":0,\"k\":0}}",
	} {
		t.Run(fmt.Sprintf("%q", b), func(t *testing.T) {
			var ke *KeyError
			if err := CheckKeys([]byte(b), reflect.TypeFor[doc]()); !errors.As(err, &ke) {
				t.Fatalf("CheckKeys = %v, want a key said twice", err)
			}
		})
	}
}

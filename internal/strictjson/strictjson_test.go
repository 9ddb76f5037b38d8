package strictjson

import (
	"encoding/json"
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

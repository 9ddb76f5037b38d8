package canonical

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// vectorDir holds the RFC 8785 cases of canonical.json (expected outputs
// computed by testdata/digests/gen.mjs, with Node.js).
const vectorDir = "../testdata/digests"

var kindNames = map[string]canonKind{
	"syntax": kSyntax, "truncated": kTruncated, "trailing": kTrailing, "bom": kBOM,
	"utf8": kUTF8, "surrogate": kSurrogate, "nonchar": kNonchar, "control": kControl,
	"escape": kEscape, "duplicate": kDuplicate, "number": kNumber, "range": kRange, "depth": kDepth,
}

type canonicalCase struct {
	Name        string `json:"name"`
	Note        string `json:"note"`
	Input       string `json:"input"`
	InputHex    string `json:"input_hex"`
	InputRepeat *struct {
		Prefix string `json:"prefix"`
		Count  int    `json:"count"`
		Suffix string `json:"suffix"`
	} `json:"input_repeat"`
	Expected *string `json:"expected"`
	Error    string  `json:"error"`
}

func (c canonicalCase) input(t *testing.T) []byte {
	t.Helper()
	switch {
	case c.InputHex != "":
		b, err := hex.DecodeString(c.InputHex)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case c.InputRepeat != nil:
		r := c.InputRepeat
		return []byte(strings.Repeat(r.Prefix, r.Count) + strings.Repeat(r.Suffix, r.Count))
	}
	return []byte(c.Input)
}

func loadCanonicalCases(t *testing.T) []canonicalCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, "canonical.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []canonicalCase
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestCanonicalizeVectors(t *testing.T) {
	for _, c := range loadCanonicalCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			got, err := Transform(c.input(t))
			if c.Error != "" {
				want, ok := kindNames[c.Error]
				if !ok {
					t.Fatalf("unknown error kind %q in the vector", c.Error)
				}
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("got %q, %v; want a *Error (%s)", got, err, c.Error)
				}
				if ce.kind != want {
					t.Fatalf("refused with %v (kind %d), want kind %s", err, ce.kind, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Expected == nil {
				t.Fatal("vector has neither expected nor error")
			}
			if string(got) != *c.Expected {
				t.Fatalf("got  %q\nwant %q", got, *c.Expected)
			}
		})
	}
}

// TestNumberSerialization is the table of RFC 8785 Appendix B (IEEE 754
// bit patterns and their ECMAScript serialization) plus a few more.
func TestNumberSerialization(t *testing.T) {
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
		{math.Float64bits(1e-7), "1e-7"},
		{math.Float64bits(1.5e-7), "1.5e-7"},
		{math.Float64bits(1e20), "100000000000000000000"},
		{math.Float64bits(1.5e21), "1.5e+21"},
		{math.Float64bits(123.456), "123.456"},
		{math.Float64bits(-0.5), "-0.5"},
	} {
		t.Run(fmt.Sprintf("%016x", c.bits), func(t *testing.T) {
			f := math.Float64frombits(c.bits)
			if got := string(appendNumber(nil, f)); got != c.want {
				t.Errorf("%016x (%v): got %s, want %s", c.bits, f, got, c.want)
			}
			// The same through the parser, from Go's own spelling of f.
			in := []byte(strings.Replace(string(appendNumber(nil, f)), "e+", "E", 1))
			if got, err := Transform(in); err != nil || string(got) != c.want {
				t.Errorf("Transform(%s) = %s, %v; want %s", in, got, err, c.want)
			}
		})
	}
}

func TestCanonicalErrorOffsets(t *testing.T) {
	for _, c := range []struct {
		in   string
		off  int
		kind canonKind
	}{
		{`{"a":1,"a":2}`, 7, kDuplicate},
		{`["x","\ud800"]`, 6, kSurrogate},
		{"[1, 2] x", 7, kTrailing},
		{`[01]`, 1, kNumber},
		{`{"a":`, 5, kTruncated},
		{"[\"a\x01\"]", 3, kControl},
		{"[\"ab\xff\"]", 4, kUTF8},
		{`[1e999]`, 1, kRange},
	} {
		t.Run(c.in, func(t *testing.T) {
			_, err := Transform([]byte(c.in))
			var ce *Error
			if !errors.As(err, &ce) || ce.Offset != c.off || ce.kind != c.kind {
				t.Errorf("Transform(%q) = %v (%+v); want kind %d at offset %d", c.in, err, ce, c.kind, c.off)
			}
		})
	}
}

func TestCanonicalJSON(t *testing.T) {
	v := struct {
		Z string         `json:"z"`
		A map[string]any `json:"a"`
		F float64        `json:"f"`
	}{Z: "<a & b>", A: map[string]any{"y": 1, "x": []int{3, 2}}, F: 1e21}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"x":[3,2],"y":1},"f":1e+21,"z":"<a & b>"}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var ce *Error
	if _, err := Marshal(math.Inf(1)); !errors.As(err, &ce) || ce.kind != kMarshal || ce.Err == nil {
		t.Fatalf("Marshal(+Inf) = %v", err)
	}
	if _, err := Marshal(map[string]any{"a": "\uffff"}); !errors.As(err, &ce) || ce.kind != kNonchar {
		t.Fatalf("CanonicalJSON with a noncharacter = %v", err)
	}
}

func TestCanonicalizeManyMembers(t *testing.T) {
	// More members than the duplicate scan handles, so the set is used.
	var b strings.Builder
	b.WriteString("{")
	for i := 99; i >= 0; i-- {
		if i != 99 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + string(rune('a'+i/10)) + string(rune('a'+i%10)) + `":0`)
	}
	b.WriteString("}")
	got, err := Transform([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), `{"kaa":0,"kab":0,`) || !strings.HasSuffix(string(got), `"kjj":0}`) {
		t.Fatalf("not sorted: %s", got)
	}
	dup := strings.Replace(b.String(), "}", `,"kcd":1}`, 1)
	var ce *Error
	if _, err := Transform([]byte(dup)); !errors.As(err, &ce) || ce.kind != kDuplicate {
		t.Fatalf("duplicate in a large object: %v", err)
	}
}

// jcsConformance is the format of $CRUXPROV_CONFORMANCE_DIR/jcs/vectors.json.
type jcsConformance struct {
	Cases []struct {
		Name          string  `json:"name"`
		Input         string  `json:"input"`
		Expected      *string `json:"expected"`
		ExpectedError string  `json:"expected_error"`
	} `json:"cases"`
}

func TestConformanceJCS(t *testing.T) {
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR is not set")
	}
	b, err := os.ReadFile(filepath.Join(dir, "jcs", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs jcsConformance
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range vs.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := Transform([]byte(c.Input))
			switch {
			case c.ExpectedError != "":
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("accepted (%q), want refused (%s)", got, c.ExpectedError)
				}
			case c.Expected != nil:
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != *c.Expected {
					t.Fatalf("got  %q\nwant %q", got, *c.Expected)
				}
			default:
				t.Fatal("case has neither expected nor expected_error")
			}
		})
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.5,-0,1e21,1E-7],"a":{"\u00e9":"x","\ud83d\ude00":null}}`,
		`"\u0000\b\t\n\f\r\"\\\/"`, `[true,false,null]`, `0`, `-1.5e-10`, `{}`, `[]`,
		`{"a":1,"a":2}`, `"\ud800"`, `01`, `+1`, `1e400`, "\xef\xbb\xbf{}", `{"a":`, "\"\xff\"",
		`[1,]`, `{"\ufb33":1,"\ud83d\ude00":2}`, `333333333.33333329`, `1424953923781206.25`,
	} {
		f.Add([]byte(s))
	}
	for _, c := range loadCanonicalCasesF(f) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Transform(in)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(in) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		again, err := Transform(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q, %v", out, again, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("accepted input that encoding/json rejects: %v", err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %#v -> %#v", a, b)
		}
	})
}

// loadCanonicalCasesF returns the inputs of testdata/digests/canonical.json
// as fuzz seeds.
func loadCanonicalCasesF(f *testing.F) [][]byte {
	b, err := os.ReadFile(filepath.Join(vectorDir, "canonical.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cs []canonicalCase
	if err := json.Unmarshal(b, &cs); err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, c := range cs {
		if c.InputHex != "" {
			h, _ := hex.DecodeString(c.InputHex)
			out = append(out, h)
		} else if c.InputRepeat == nil {
			out = append(out, []byte(c.Input))
		}
	}
	return out
}

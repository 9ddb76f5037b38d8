package receipts

import (
	"encoding/json"
	"strings"
	"testing"
)

// validJSONCases are the edges of RFC 8259's grammar; each is also a seed
// of FuzzValidJSON.
var validJSONCases = []string{
	``, ` `, `{}`, ` { } `, `[]`, `[ ]`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
	`[1,]`, `[,1]`, `[1 2]`, `"x"`, `"x`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u00e9"`,
	`"\u00E9"`, `"\u00g9"`, `"\u00e"`, "\"a\x1fb\"", "\"a\x7fb\"", "\"\xff\"", `0`, `-0`, `-`, `01`,
	`1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`, `+1`, `true`, `tru`, `truex`,
	`false`, `null`, `nul`, `{"a":[1,{"b":null}]}`, `[[[]]]`, `[[[]]`, `{"a":1}}`, `1 2`, "\t\r\n1\n",
	`{"a":1}x`, "\x00", `[1,{"a":"b"},"c",true,false,null,-0.5e-7]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

// TestValidJSON: validJSON says what json.Valid says on each edge.
func TestValidJSON(t *testing.T) {
	for _, s := range validJSONCases {
		name := s
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		t.Run(name, func(t *testing.T) {
			if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
				t.Errorf("validJSON = %v, json.Valid = %v", got, want)
			}
		})
	}
}

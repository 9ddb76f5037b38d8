package digest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"sha256:" + strings.Repeat("ab", 32), "sha256:" + strings.Repeat("AB", 32), "sha256:", "",
		"sha512:" + strings.Repeat("00", 32), "sha256:" + strings.Repeat("0", 63) + "g",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !d.IsZero() {
				t.Fatalf("bad failure: %v, %v", d, err)
			}
			return
		}
		if d.String() != s || d.IsZero() {
			t.Fatalf("Parse(%q).String() = %q", s, d)
		}
		var back Digest
		if err := back.UnmarshalText([]byte(d.String())); err != nil || back != d {
			t.Fatalf("text round trip: %v, %v", back, err)
		}
		j, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(j, &back); err != nil || back != d {
			t.Fatalf("JSON round trip: %v, %v", back, err)
		}
	})
}

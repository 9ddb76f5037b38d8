package canonical

import (
	"encoding/hex"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocRefusalExamples: every example in docs/digests.md's table of
// refused input is refused, with the kind of refusal its row names.
// Examples are JSON text as written, except: bytes in hex ("EF BB BF 7B
// 7D"), \xHH in the invalid-UTF-8 row (a byte), "[[[[…]]]]" (nesting past
// the limit) and the unescaped-control row's raw tab and newline.
func TestDocRefusalExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "| refused | example |")
	if start < 0 {
		t.Fatal("docs/digests.md: no table of refused input")
	}
	table := string(doc[start:])
	table = table[:strings.Index(table, "\n\n")]
	rows := strings.Split(table, "\n")[2:]
	// The kinds, in the table's row order.
	kinds := [][]canonKind{{kBOM}, {kUTF8}, {kSurrogate}, {kNonchar}, {kControl}, {kEscape}, {kDuplicate},
		{kNumber, kSyntax, kTruncated}, {kRange}, {kTrailing}, {kTruncated}, {kDepth}}
	if len(rows) != len(kinds) {
		t.Fatalf("docs/digests.md: %d rows of refused input, this test knows %d", len(rows), len(kinds))
	}
	hexBytes := regexp.MustCompile(`^[0-9A-F]{2}( [0-9A-F]{2})*$`)
	n := 0
	for i, row := range rows {
		cells := strings.Split(strings.Trim(row, "|"), " | ")
		if len(cells) != 2 {
			t.Fatalf("row %q", row)
		}
		what, ex := cells[0], cells[1]
		var inputs [][]byte
		switch {
		case strings.Contains(what, "unescaped control"):
			inputs = [][]byte{[]byte("\"a\tb\""), []byte("\"a\nb\"")}
		default:
			for _, m := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(ex, -1) {
				s := m[1]
				switch {
				case hexBytes.MatchString(s):
					b, _ := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
					inputs = append(inputs, b)
				case strings.Contains(what, "invalid UTF-8"):
					u, err := strconv.Unquote(s)
					if err != nil {
						t.Fatalf("%s: %v", s, err)
					}
					inputs = append(inputs, []byte(`"`+u+`"`))
				case s == "[[[[…]]]]":
					inputs = append(inputs, []byte(strings.Repeat("[", 1001)+strings.Repeat("]", 1001)))
				default:
					inputs = append(inputs, []byte(s))
				}
			}
		}
		if len(inputs) == 0 {
			t.Errorf("row %q has no example", what)
		}
		for _, in := range inputs {
			n++
			out, err := Transform(in)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("%s: %q gives %q, %v; want it refused", what, in, out, err)
				continue
			}
			found := false
			for _, k := range kinds[i] {
				found = found || ce.kind == k
			}
			if !found {
				t.Errorf("%s: %q refused as kind %d (%v), want one of %v", what, in, ce.kind, err, kinds[i])
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d examples of refused input", n)
	}
}

package refusal

import (
	"os"
	"regexp"
	"sort"
	"testing"
)

// TestDocMatchesCodes holds docs/refusals.md and the constant set to the
// same set of codes, each listed once.
func TestDocMatchesCodes(t *testing.T) {
	b, err := os.ReadFile("../docs/refusals.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	doc := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]]++
	}
	code := map[string]int{}
	for _, c := range Codes() {
		code[string(c)]++
	}
	var diff []string
	for c, n := range doc {
		if n != 1 {
			diff = append(diff, "doc lists "+c+" more than once")
		}
		if code[c] == 0 {
			diff = append(diff, "doc lists "+c+", no constant")
		}
	}
	for c, n := range code {
		if n != 1 {
			diff = append(diff, "constant "+c+" more than once")
		}
		if doc[c] == 0 {
			diff = append(diff, "constant "+c+" not in docs/refusals.md")
		}
	}
	sort.Strings(diff)
	for _, d := range diff {
		t.Error(d)
	}
}

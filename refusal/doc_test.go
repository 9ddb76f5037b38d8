package refusal

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docTables is docs/refusals.md's code table (before "## Remedies") and
// its remedy table (after), each as the first column's names, counted.
func docTables(t *testing.T) (codes, actions map[string]int) {
	t.Helper()
	b, err := os.ReadFile("../docs/refusals.md")
	if err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(string(b), "\n## Remedies\n")
	if !ok {
		t.Fatal("docs/refusals.md has no \"## Remedies\" section")
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	names := func(s string) map[string]int {
		m := map[string]int{}
		for _, r := range row.FindAllStringSubmatch(s, -1) {
			m[r[1]]++
		}
		return m
	}
	return names(before), names(after)
}

// same reports how doc and the constants differ: each listed once, and
// the same set.
func same(t *testing.T, what string, doc, constants map[string]int) {
	t.Helper()
	var diff []string
	for c, n := range doc {
		if n != 1 {
			diff = append(diff, "doc lists "+what+" "+c+" more than once")
		}
		if constants[c] == 0 {
			diff = append(diff, "doc lists "+what+" "+c+", no constant")
		}
	}
	for c, n := range constants {
		if n != 1 {
			diff = append(diff, what+" constant "+c+" more than once")
		}
		if doc[c] == 0 {
			diff = append(diff, what+" constant "+c+" not in docs/refusals.md")
		}
	}
	sort.Strings(diff)
	for _, d := range diff {
		t.Error(d)
	}
}

// TestDocMatchesCodes holds docs/refusals.md and the constant set to the
// same set of codes, each listed once.
func TestDocMatchesCodes(t *testing.T) {
	doc, _ := docTables(t)
	code := map[string]int{}
	for _, c := range Codes() {
		code[string(c)]++
	}
	same(t, "code", doc, code)
}

// TestDocMatchesActions holds the remedy table of docs/refusals.md and
// the Action constants of refusal.go to the same set: a machine reads
// --json's remedy.action, and each one it can meet is documented.
func TestDocMatchesActions(t *testing.T) {
	_, doc := docTables(t)
	f, err := parser.ParseFile(token.NewFileSet(), "refusal.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Action" {
				continue
			}
			for _, val := range v.Values {
				if lit, ok := val.(*ast.BasicLit); ok {
					name, _ := strconv.Unquote(lit.Value)
					actions[name]++
				}
			}
		}
	}
	if len(actions) == 0 {
		t.Fatal("no Action constants found in refusal.go")
	}
	same(t, "action", doc, actions)
}

// TestDocSaysWhatToDo: each code's row of docs/refusals.md says what
// raises it and what the operator does about it (DESIGN §2), two cells
// with words in them: the name alone in its row passed
// TestDocMatchesCodes.
func TestDocSaysWhatToDo(t *testing.T) {
	b, err := os.ReadFile("../docs/refusals.md")
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := strings.Cut(string(b), "\n## Remedies\n")
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\|(.*)\\|\\s*$")
	n := 0
	for _, line := range strings.Split(before, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		// The last cell is what to do; the cells before it (a `|` in
		// a cell's code span splits it, harmlessly) say what raises it.
		i := strings.LastIndex(m[2], " | ")
		if i < 0 || strings.TrimSpace(m[2][:i]) == "" || strings.TrimSpace(m[2][i+3:]) == "" {
			t.Errorf("docs/refusals.md: %s's row does not say both what raises it and what to do", m[1])
		}
	}
	if n != len(Codes()) {
		t.Errorf("docs/refusals.md has %d code rows, want %d", n, len(Codes()))
	}
}

package refusal

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// TestEveryConstantIsACode holds codes.go's Code constants and Codes() to
// the same set (DESIGN §2: a closed set, one Go constant each): a
// constant added without its line in the list was no code Known knew,
// and TestDocMatchesCodes, which reads Codes(), never saw it. Each is
// snake_case, and no two constants share a string (a code is never
// reused for two meanings).
func TestEveryConstantIsACode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	consts := map[Code]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, val := range v.Values {
				lit, ok := val.(*ast.BasicLit)
				if !ok {
					t.Errorf("%s is not a string literal", v.Names[i].Name)
					continue
				}
				s, _ := strconv.Unquote(lit.Value)
				if other, ok := consts[Code(s)]; ok {
					t.Errorf("%s and %s are both %q", other, v.Names[i].Name, s)
				}
				consts[Code(s)] = v.Names[i].Name
				if !snake.MatchString(s) {
					t.Errorf("%s = %q is not snake_case", v.Names[i].Name, s)
				}
				if !Known(Code(s)) {
					t.Errorf("%s = %q is not in Codes()", v.Names[i].Name, s)
				}
			}
		}
	}
	for _, c := range Codes() {
		if _, ok := consts[c]; !ok {
			t.Errorf("Codes() holds %q, which no constant is", c)
		}
	}
	if len(consts) < 50 {
		t.Fatalf("only %d Code constants found in codes.go", len(consts))
	}
}

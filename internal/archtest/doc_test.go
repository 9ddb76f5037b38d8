// Package archtest holds the architecture to its promises with tests: every
// package says what it owns, every exported identifier is documented, and
// libraries neither print, read the environment nor name the CLI's
// commands and flags (only cmd/ does).
package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// packages returns every non-test Go package directory under the module root.
func packages(t *testing.T) map[string][]*ast.File {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || n == "build" || n == "python") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestPackageDocs(t *testing.T) {
	for dir, files := range packages(t) {
		has := false
		for _, f := range files {
			if f.Doc != nil && len(strings.TrimSpace(f.Doc.Text())) > 20 {
				has = true
			}
		}
		if !has {
			t.Errorf("%s: no package doc comment saying what it owns", dir)
		}
	}
}

func TestExportedIdentifiersDocumented(t *testing.T) {
	for dir, files := range packages(t) {
		if strings.HasPrefix(dir, "cmd/") {
			continue
		}
		for _, f := range files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil && exportedRecv(d) && !(d.Recv != nil && wellKnown[d.Name.Name]) {
						t.Errorf("%s: func %s undocumented", dir, d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								t.Errorf("%s: type %s undocumented", dir, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									t.Errorf("%s: %s undocumented", dir, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
}

// wellKnown methods implement standard interfaces and need no doc of their own.
var wellKnown = map[string]bool{"Error": true, "String": true, "Unwrap": true, "Is": true, "As": true,
	"MarshalText": true, "UnmarshalText": true, "MarshalJSON": true, "UnmarshalJSON": true,
	"Len": true, "Less": true, "Swap": true, "Read": true, "Write": true, "Close": true}

func exportedRecv(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	typ := d.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// TestLibrariesDoNotPrintOrReadEnv: only cmd/ may print to the process's
// streams or read environment variables (STYLE 4).
func TestLibrariesDoNotPrintOrReadEnv(t *testing.T) {
	banned := map[string]bool{
		"fmt.Print": true, "fmt.Println": true, "fmt.Printf": true,
		"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true,
		"log.Print": true, "log.Printf": true, "log.Println": true, "log.Fatal": true, "log.Fatalf": true,
	}
	for dir, files := range packages(t) {
		if strings.HasPrefix(dir, "cmd/") || strings.HasSuffix(dir, "/cmd") {
			continue
		}
		if strings.HasSuffix(dir, "test") && dir != "internal/archtest" {
			// Test-support packages (invoketest, registrytest) run inside
			// tests, where reading the environment is the test's business.
			continue
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if ok && banned[x.Name+"."+sel.Sel.Name] {
					t.Errorf("%s: library calls %s.%s", dir, x.Name, sel.Sel.Name)
				}
				return true
			})
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/urfave/cli/v2" {
					t.Errorf("%s: library imports the CLI framework", dir)
				}
			}
		}
	}
	_ = os.Stderr
}

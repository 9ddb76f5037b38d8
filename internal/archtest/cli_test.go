package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cliNames returns the top-level command names cmd/cruxprov registers
// (register(&cli.Command{Name: …})) and the long flags it defines
// (&cli.XxxFlag{Name: …, Aliases: …}, two letters or more).
func cliNames(t *testing.T) (commands, flags map[string]bool) {
	t.Helper()
	dir := filepath.Join("..", "..", "cmd", "cruxprov")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	commands, flags = map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "register" && len(n.Args) == 1 {
					if u, ok := n.Args[0].(*ast.UnaryExpr); ok {
						if cl, ok := u.X.(*ast.CompositeLit); ok {
							for _, s := range fieldStrings(cl, "Name") {
								commands[s] = true
							}
						}
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && strings.HasSuffix(sel.Sel.Name, "Flag") {
					for _, s := range append(fieldStrings(n, "Name"), fieldStrings(n, "Aliases")...) {
						if len(s) > 1 {
							flags[s] = true
						}
					}
				}
			}
			return true
		})
	}
	if len(commands) < 10 || len(flags) < 20 {
		t.Fatalf("found %d commands and %d flags in cmd/cruxprov: the parse no longer finds them", len(commands), len(flags))
	}
	return commands, flags
}

// fieldStrings is the string literals of cl's field key (a string, or a
// []string literal).
func fieldStrings(cl *ast.CompositeLit, key string) []string {
	var out []string
	for _, el := range cl.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != key {
			continue
		}
		var lits []ast.Expr
		if inner, ok := kv.Value.(*ast.CompositeLit); ok {
			lits = inner.Elts
		} else {
			lits = []ast.Expr{kv.Value}
		}
		for _, l := range lits {
			if b, ok := l.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, err := strconv.Unquote(b.Value); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// allowed are the literals that name a cruxprov command or flag word
// and are no advice to run it, by "FILE --flag" or "FILE cruxprov CMD",
// with why.
var allowed = map[string]string{
	// podman's own flags, in the argv podman is run with.
	"podman/podman.go --name":    "podman run --name",
	"podman/podman.go --quiet":   "podman pull --quiet",
	"podman/podman.go --timeout": "podman run --timeout",
	// An image's history records the tool that made each layer; the
	// layer cache's key names what it hashes. Neither is advice, and
	// changing either changes what was built.
	"image/build.go cruxprov image":      "the OCI history's created_by",
	"image/layercache.go cruxprov image": "the layer cache key's domain",
}

var (
	flagToken = regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]+)`)
	cmdToken  = regexp.MustCompile(`\bcruxprov\s+([a-z][a-z-]*)`)
)

// TestLibrariesNameNoCLI: no library (anything outside cmd/) names a
// cruxprov command line, a subcommand ("cruxprov key trust") or one of
// its CLI's flags ("--offline"), in a string literal: a Go caller (an
// executor calling pinned.Run or verify) reads its refusals and errors,
// where a command line is nonsense. A library says what to do in words
// and attaches a typed remedy (refusal.Error.WithRemedy) that cmd/
// renders as a command (issue 12 item 5).
func TestLibrariesNameNoCLI(t *testing.T) {
	commands, flags := cliNames(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	used := map[string]bool{}
	isAllowed := func(key string) bool {
		used[key] = allowed[key] != ""
		return used[key]
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			n := d.Name()
			if p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || n == "build" || n == "python" ||
				rel == "cmd" || rel == "internal/archtest" || rel == "internal/fixtures" || strings.HasSuffix(n, "test")) {
				// cmd/ renders command lines; test-support packages
				// (registrytest, wheeltest, the fixtures) run inside
				// tests and may drive the CLI.
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			b, ok := n.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(b.Value)
			if err != nil {
				return true
			}
			for _, m := range cmdToken.FindAllStringSubmatch(s, -1) {
				if commands[m[1]] && !isAllowed(rel+" cruxprov "+m[1]) {
					found = append(found, rel+": names the command \"cruxprov "+m[1]+"\": "+strconv.Quote(s))
				}
			}
			for _, m := range flagToken.FindAllStringSubmatch(s, -1) {
				if flags[m[1]] && !isAllowed(rel+" --"+m[1]) {
					found = append(found, rel+": names the flag --"+m[1]+": "+strconv.Quote(s))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range allowed {
		if !used[key] {
			found = append(found, key+": allowed, and no longer found: take it off the list")
		}
	}
	sort.Strings(found)
	for _, s := range found {
		t.Error(s)
	}
}

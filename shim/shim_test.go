package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	ok := []struct {
		name string
		args []string
		want options
	}{
		{"no flag", []string{"python", "-I"}, options{mode: modeNone, timeout: DefaultPipeTimeout, argv: []string{"python", "-I"}}},
		{"no flag dashdash", []string{"--", "-weird"}, options{timeout: DefaultPipeTimeout, argv: []string{"-weird"}}},
		{"path", []string{"--secret-path", "/run/s/b", "--", "py", "--x"}, options{mode: modePath, path: "/run/s/b", timeout: DefaultPipeTimeout, argv: []string{"py", "--x"}}},
		{"path equals", []string{"--secret-path=/run/s/b", "py"}, options{mode: modePath, path: "/run/s/b", timeout: DefaultPipeTimeout, argv: []string{"py"}}},
		{"pipe", []string{"--secret-pipe-fd", "7", "py"}, options{mode: modePipe, pipeFD: 7, timeout: DefaultPipeTimeout, argv: []string{"py"}}},
		{"pipe timeout", []string{"--secret-pipe-timeout", "0.25", "--secret-pipe-fd=3", "--", "py"}, options{mode: modePipe, pipeFD: 3, timeout: 250 * time.Millisecond, argv: []string{"py"}}},
		{"pipe timeout whole", []string{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "12", "py"}, options{mode: modePipe, pipeFD: 3, timeout: 12 * time.Second, argv: []string{"py"}}},
		{"flags after CMD are CMD's", []string{"py", "--secret-path", "x"}, options{timeout: DefaultPipeTimeout, argv: []string{"py", "--secret-path", "x"}}},
		{"a day", []string{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "86400", "py"}, options{mode: modePipe, pipeFD: 3, timeout: 24 * time.Hour, argv: []string{"py"}}},
		{"protocol fd env", []string{"--protocol-fd-env", "CRUXIBLE_PROTOCOL_FD", "--", "py"}, options{timeout: DefaultPipeTimeout, protoVar: "CRUXIBLE_PROTOCOL_FD", argv: []string{"py"}}},
		{"protocol fd env and pipe", []string{"--secret-pipe-fd", "3", "--protocol-fd-env=_X9", "py"}, options{mode: modePipe, pipeFD: 3, timeout: DefaultPipeTimeout, protoVar: "_X9", argv: []string{"py"}}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, good := parseArgs(c.args)
			if !good {
				t.Fatalf("parseArgs(%q) refused", c.args)
			}
			if got.mode != c.want.mode || got.path != c.want.path || got.pipeFD != c.want.pipeFD ||
				got.timeout != c.want.timeout || !slices.Equal(got.argv, c.want.argv) {
				t.Fatalf("parseArgs(%q) = %+v, want %+v", c.args, got, c.want)
			}
		})
	}
	bad := [][]string{
		nil,
		{},
		{"--"},
		{"--", ""},
		{""},
		{"--secret-path", "p"},
		{"--secret-path", "p", "--"},
		{"--secret-path"},
		{"--secret-path", "", "py"},
		{"--secret-path=", "py"},
		{"--secret-path", "a\x00b", "py"},
		{"--secret-path", "a", "--secret-path", "b", "py"},
		{"--secret-path", "a", "--secret-pipe-fd", "3", "py"},
		{"--secret-pipe-fd", "3", "--secret-path", "a", "py"},
		{"--secret-pipe-fd", "2", "py"},
		{"--secret-pipe-fd", "0", "py"},
		{"--secret-pipe-fd", "-3", "py"},
		{"--secret-pipe-fd", "+3", "py"},
		{"--secret-pipe-fd", "3x", "py"},
		{"--secret-pipe-fd", " 3", "py"},
		{"--secret-pipe-fd", "99999999999", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-fd", "4", "py"},
		{"--secret-pipe-timeout", "1", "py"},
		{"--secret-path", "p", "--secret-pipe-timeout", "1", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "0", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "0.0", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "-1", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "1e3", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "1.", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", ".5", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "5s", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "86401", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "inf", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "1.0000000001", "py"},
		{"--secret-pipe-fd", "3", "--secret-pipe-timeout", "1", "--secret-pipe-timeout", "1", "py"},
		{"--help"},
		{"-h", "py"},
		{"--secret_path", "p", "py"},
		{"-", "py"},
		{"--verbose", "py"},
		{"--protocol-fd-env", "", "py"},
		{"--protocol-fd-env", "lower", "py"},
		{"--protocol-fd-env", "9X", "py"},
		{"--protocol-fd-env", "A-B", "py"},
		{"--protocol-fd-env", "A=B", "py"},
		{"--protocol-fd-env", "A", "--protocol-fd-env", "A", "py"},
		{"--protocol-fd-env", "A"},
	}
	for _, args := range bad {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			if o, good := parseArgs(args); good {
				t.Errorf("parseArgs(%q) = %+v, want usage", args, o)
			}
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"py", "--secret-path\x00/p\x00py", "--secret-pipe-fd=3\x00--secret-pipe-timeout\x001.5\x00--\x00py",
		"--secret-pipe-fd\x002\x00py", "--\x00--", "--secret-pipe-timeout\x00999999.999999999\x00py", "-",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		o, ok := parseArgs(args)
		if !ok {
			return
		}
		if len(o.argv) == 0 || o.argv[0] == "" {
			t.Fatalf("accepted %q without a CMD", args)
		}
		switch o.mode {
		case modePath:
			if o.path == "" {
				t.Fatalf("accepted %q with an empty path", args)
			}
		case modePipe:
			if o.pipeFD < 3 {
				t.Fatalf("accepted %q with fd %d", args, o.pipeFD)
			}
		}
		if o.timeout <= 0 || o.timeout > maxPipeTimeout {
			t.Fatalf("accepted %q with timeout %v", args, o.timeout)
		}
	})
}

func TestSecretChannel(t *testing.T) {
	in := []string{"github_token", "api_key", "github_token"}
	ch := SecretChannel(in)
	b, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"fd":3,"refs":["api_key","github_token"]}`; got != want {
		t.Errorf("SecretChannel = %s, want %s", got, want)
	}
	if !slices.Equal(in, []string{"github_token", "api_key", "github_token"}) {
		t.Errorf("SecretChannel changed its argument: %q", in)
	}
	for _, refs := range [][]string{nil, {}} {
		t.Run(fmt.Sprintf("%#v", refs), func(t *testing.T) {
			ch := SecretChannel(refs)
			if ch != nil {
				t.Errorf("SecretChannel(%q) = %+v, want nil", refs, ch)
			}
			b, _ := json.Marshal(struct {
				C *Channel `json:"secret_channel"`
			}{ch})
			if string(b) != `{"secret_channel":null}` {
				t.Errorf("no refs marshal as %s", b)
			}
		})
	}
}

func ExampleSecretChannel() {
	b, _ := json.Marshal(SecretChannel([]string{"openai", "anthropic"}))
	fmt.Println(string(b))
	// Output: {"fd":3,"refs":["anthropic","openai"]}
}

func TestRefusedErrorLine(t *testing.T) {
	if got := refuse(codeTooLarge).Error(); got != "shim_refused: secret_too_large" {
		t.Errorf("line = %q", got)
	}
}

// TestImports holds shim and cmd/cruxshim to the standard library and
// golang.org/x/sys: the entrypoint of every image stays small and auditable.
func TestImports(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json", "./shim/", "./cmd/cruxshim/")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case p.Standard,
			strings.HasPrefix(p.ImportPath, "golang.org/x/sys/"),
			p.ImportPath == "github.com/cruxible/cruxprov/shim",
			p.ImportPath == "github.com/cruxible/cruxprov/cmd/cruxshim":
		default:
			t.Errorf("cruxshim depends on %s: only the standard library and golang.org/x/sys are allowed", p.ImportPath)
		}
	}
	if n < 10 {
		t.Fatalf("go list listed only %d packages", n)
	}
}

// TestDocListsCodes holds docs/shim.md's code table to the closed set.
func TestDocListsCodes(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "docs", "shim.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var documented []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			code, _, _ := strings.Cut(rest, "`")
			documented = append(documented, code)
		}
	}
	want := slices.Clone(codes)
	slices.Sort(want)
	slices.Sort(documented)
	if !slices.Equal(documented, want) {
		t.Errorf("docs/shim.md lists %q, the code set is %q", documented, want)
	}
}

// TestDocGoAPI holds docs/shim.md's "Go API" section to the package's
// exported identifiers: each is listed there as shim.NAME. ProtocolFD and
// ParseRefused, which executors use, were missing from it.
func TestDocGoAPI(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "shim.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, api, ok := strings.Cut(string(doc), "\n## Go API\n")
	if !ok {
		t.Fatal(`docs/shim.md has no "## Go API" section`)
	}
	api, _, _ = strings.Cut(api, "\n## ")
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					exported = append(exported, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							exported = append(exported, sp.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							if n.IsExported() {
								exported = append(exported, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if len(exported) < 5 {
		t.Fatalf("found only %q exported", exported)
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(exported))) {
		if !regexp.MustCompile(`\bshim\.` + name + `\b`).MatchString(api) {
			t.Errorf("docs/shim.md's Go API does not list shim.%s", name)
		}
	}
}

// FuzzParseRefused: whatever a run wrote on stderr, ParseRefused names a
// code only when stderr is the shim's one line for a code of the closed
// set, and nothing else.
func FuzzParseRefused(f *testing.F) {
	for _, s := range []string{"shim_refused: secret_pipe_timeout\n", "shim_refused: exec_failed", "Traceback\nshim_refused: usage\n", "shim_refused: nope\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		code, ok := ParseRefused(b)
		if ok && (string(b) != "shim_refused: "+code+"\n" || !slices.Contains(codes, code)) {
			t.Fatalf("%q: %q", b, code)
		}
		if !ok && code != "" {
			t.Fatalf("%q: %q not ok", b, code)
		}
	})
}

func TestParseRefused(t *testing.T) {
	for _, c := range codes {
		if got, ok := ParseRefused([]byte(refuse(c).Error() + "\n")); !ok || got != c {
			t.Errorf("%s: %q %v", c, got, ok)
		}
	}
	for _, s := range []string{"Traceback\nshim_refused: usage\n", "shim_refused: usage\nmore\n", "shim_refused: usage", "shim_refused: nope\n"} {
		if got, ok := ParseRefused([]byte(s)); ok {
			t.Errorf("%q: %q", s, got)
		}
	}
}

package lockfile

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// burntSushi decodes s with BurntSushi/toml into plain values.
func burntSushi(s string) (any, error) {
	var m map[string]any
	if _, err := toml.Decode(s, &m); err != nil {
		return nil, err
	}
	return normalizeBS(m), nil
}

func normalizeBS(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normalizeBS(x)
		}
		return out
	case []map[string]any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalizeBS(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalizeBS(x)
		}
		return out
	}
	return v
}

// sameValue compares decoded documents; times compare as instants with
// the same zone offset and name.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, x := range a {
			y, ok := b[k]
			if !ok || !sameValue(x, y) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case time.Time:
		b, ok := b.(time.Time)
		if !ok || !a.Equal(b) {
			return false
		}
		na, oa := a.Zone()
		nb, ob := b.Zone()
		return na == nb && oa == ob
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a == b
}

// checkFast holds the fast reader to BurntSushi/toml on one document: when
// it accepts, BurntSushi accepts too and builds the same values.
func checkFast(t *testing.T, s string) (accepted bool) {
	t.Helper()
	tree, ok := parseTOML(s)
	if !ok {
		return false
	}
	want, err := burntSushi(s)
	if err != nil {
		t.Fatalf("fast reader accepts what BurntSushi refuses (%v):\n%s", err, s)
	}
	got := plain(tree)
	if !sameValue(got, want) {
		t.Fatalf("fast reader and BurntSushi disagree on\n%s\nfast:        %#v\nBurntSushi: %#v", s, got, want)
	}
	return true
}

// TestTOMLFastReader: documents the fast reader must read (and read as
// BurntSushi does), and documents it must hand to BurntSushi.
func TestTOMLFastReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		fast bool
	}{
		{"empty", "", true},
		{"comments and blank lines", "# c\n\n  # d\r\na = 1 # e\n", true},
		{"strings", `a = "x\ty\u00e9\U0001F600\\\"" ` + "\nb = 'C:\\raw'\nc = \"\"\n", true},
		{"integers", "a = 0\nb = -17\nc = +1_000\nd = 9223372036854775807\n", true},
		{"booleans", "a = true\nb = false\n", true},
		{"datetimes", "a = 2024-01-02T03:04:05Z\nb = 2024-01-02T03:04:05.123456+02:00\nc = 1979-05-27T00:32:00.999999-07:00\n", true},
		{"arrays", "a = [1, 'two', [3], { x = 4 }, ]\nb = [\n  1, # one\n  2,\n]\nc = []\n", true},
		{"inline tables", "a = { b = 1, c.d = 'e', f = { g = [] } }\nh = {}\n", true},
		{"quoted and dotted keys", "\"a b\".c = 1\n'd'.\"e\" = 2\nf . g = 3\n", true},
		{"tables", "[a]\nx = 1\n[a.b]\ny = 2\n[c.d]\n[c]\nz = 3\n", true},
		{"array tables", "[[p]]\nn = 1\n[p.v]\nt = 'git'\n[[p.w]]\nu = 1\n[[p.w]]\nu = 2\n[[p]]\nn = 2\n", true},
		{"dotted then more dotted", "a.b = 1\na.c = 2\n[t]\nx.y = 1\nx.z = 2\n", true},
		{"crlf", "a = 1\r\n[b]\r\nc = 'd'\r\n", true},

		// Valid TOML the fast reader leaves to BurntSushi.
		{"multi-line basic", "a = \"\"\"\nx\"\"\"\n", false},
		{"multi-line literal", "a = '''x'''\n", false},
		{"float", "a = 1.5\n", false},
		{"hex", "a = 0xff\n", false},
		{"local date", "a = 2024-01-02\n", false},
		{"space datetime", "a = 2024-01-02 03:04:05Z\n", false},
		{"lowercase z", "a = 2024-01-02T03:04:05z\n", false},
		{"header through dotted", "[a]\nb.c = 1\n[a.b.d]\n", false},
		{"escape e", "a = \"\\e\"\n", false},
		{"inline newline", "a = { b = 1,\n c = 2 }\n", false},
		{"empty quoted key", "\"\" = 1\n", false},

		// Invalid TOML: the fast reader gives up, BurntSushi refuses.
		{"duplicate key", "a = 1\na = 2\n", false},
		{"duplicate table", "[a]\n[a]\n", false},
		{"table after dotted", "a.b = 1\n[a]\n", false},
		{"dotted into header table", "[a.b]\nx = 1\n[a]\nb.y = 2\n", false},
		{"append to static array", "a = []\n[[a]]\n", false},
		{"table over array table", "[[a]]\n[a]\n", false},
		{"extend inline", "a = { b = 1 }\n[a.c]\n", false},
		{"extend inline dotted", "a = { b = 1 }\na.c = 2\n", false},
		{"two values on a line", "a = 1 b = 2\n", false},
		{"leading zero", "a = 01\n", false},
		{"overflow", "a = 9223372036854775808\n", false},
		{"bad datetime", "a = 2024-13-02T03:04:05Z\n", false},
		{"surrogate", "a = \"\\ud800\"\n", false},
		{"control char", "a = \"\x01\"\n", false},
		{"lone cr", "a = 1\rb = 2\n", false},
		{"unterminated", "a = \"x\n", false},
		{"trailing inline comma", "a = { b = 1, }\n", false},
		{"bad utf-8", "a = \"\xff\"\n", false},
		{"bom", "\ufeffa = 1\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkFast(t, tc.doc); got != tc.fast {
				t.Errorf("fast reader accepted = %v, want %v", got, tc.fast)
			}
			if !tc.fast {
				// Whatever the fast reader does, Parse's answer is BurntSushi's.
				_, want := burntSushi(tc.doc)
				_, got := decodeTOML(tc.doc)
				if (want == nil) != (got == nil) {
					t.Errorf("decodeTOML error %v, BurntSushi %v", got, want)
				}
			}
		})
	}
}

// TestTOMLFastReaderLocks: every lock this package has (the test and
// benchmark locks, the testdata cases, the conformance corpus when
// present) goes through the fast reader, which reads each as BurntSushi
// does.
func TestTOMLFastReaderLocks(t *testing.T) {
	docs := map[string]string{"good": string(lockOf(good)), "bench": string(benchLock(20))}
	for name, c := range lockCases(t) {
		docs["testdata/"+name] = string(c.lock)
	}
	if dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR"); dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "pylock", "*.toml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs["conformance/"+filepath.Base(f)] = string(b)
		}
	}
	var fast, valid int
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			ok := checkFast(t, doc)
			if _, err := burntSushi(doc); err == nil {
				valid++
				if ok {
					fast++
				} else {
					t.Logf("valid TOML read by BurntSushi, not the fast reader")
				}
			}
		})
	}
	t.Logf("%d documents, %d valid TOML, %d of them read by the fast reader", len(docs), valid, fast)
	if fast*10 < valid*9 {
		t.Errorf("the fast reader reads only %d of %d valid documents", fast, valid)
	}
}

// FuzzTOMLDifferential holds the fast reader to BurntSushi/toml: whatever
// it accepts, BurntSushi accepts with the same values.
func FuzzTOMLDifferential(f *testing.F) {
	f.Add(string(lockOf(good)))
	f.Add(string(benchLock(2)))
	for _, s := range []string{
		"a = 1\n[b]\nc = 'd'\n[[e]]\nf = [1, 2, { g = 3 }]\n[e.h]\ni.j = true\n",
		"a = { b.c = 1, d = [] }\n\"k y\" = 2024-01-02T03:04:05.5+01:00\n",
		"[a.b]\n[a]\n[[c.d]]\n[c.d.e]\n[[c.d]]\n",
		"x = \"\\u00e9\\n\\\"\" # c\r\ny = 'lit'\n",
		"a = [\n  # c\n  1,\n  \n]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkFast(t, s)
	})
}

// Example-sized sanity check that plain gives BurntSushi's shapes.
func TestTOMLPlainShapes(t *testing.T) {
	tree, ok := parseTOML("[[a]]\nb = [1]\nc = { d = 'e' }\n")
	if !ok {
		t.Fatal("not read")
	}
	got := fmt.Sprintf("%#v", plain(tree))
	want := `map[string]interface {}{"a":[]interface {}{map[string]interface {}{"b":[]interface {}{1}, "c":map[string]interface {}{"d":"e"}}}}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

package pep508

import (
	"errors"
	"slices"
	"testing"

	"github.com/cruxible/cruxprov/marker"
	"github.com/cruxible/cruxprov/pep440"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, in string
		// want is String(); key, extras, spec, url and marker the parts.
		want, key, spec, url, marker string
		extras                       []string
	}{
		{name: "bare", in: "httpx", want: "httpx", key: "httpx"},
		{name: "pinned", in: "httpx==0.27.2", want: "httpx==0.27.2", key: "httpx", spec: "==0.27.2"},
		{name: "name normalized for the key", in: "Zope.Interface_X>=5", want: "Zope.Interface_X>=5", key: "zope-interface-x", spec: ">=5"},
		{name: "several clauses sorted", in: "a >= 1.0 , < 2", want: "a<2,>=1.0", key: "a", spec: "<2,>=1.0"},
		{name: "parenthesized", in: "a (>=1.0,<2)", want: "a<2,>=1.0", key: "a", spec: "<2,>=1.0"},
		{name: "empty parentheses", in: "a ( )", want: "a", key: "a"},
		{name: "extras sorted and deduplicated", in: "a[Z, y,y]~=1.4", want: "a[Z,y]~=1.4", key: "a", spec: "~=1.4", extras: []string{"Z", "y"}},
		{name: "empty extras", in: "a[]", want: "a", key: "a"},
		{name: "marker", in: `a>=1;python_version<"3.12"`, want: `a>=1; python_version < "3.12"`, key: "a", spec: ">=1", marker: `python_version < "3.12"`},
		{name: "marker after parentheses", in: `a (>=1) ; os_name == 'posix'`, want: `a>=1; os_name == "posix"`, key: "a", spec: ">=1", marker: `os_name == "posix"`},
		{name: "marker without specifier", in: `idna ; extra == "x"`, want: `idna; extra == "x"`, key: "idna", marker: `extra == "x"`},
		{name: "url", in: "pip @ https://example.com/pip-1.0-py3-none-any.whl#sha256=ab", want: "pip @ https://example.com/pip-1.0-py3-none-any.whl#sha256=ab", key: "pip", url: "https://example.com/pip-1.0-py3-none-any.whl#sha256=ab"},
		{name: "url with extras and marker", in: `pip[x]@file:///w/pip.whl ; sys_platform == "linux"`, want: `pip[x] @ file:///w/pip.whl ; sys_platform == "linux"`, key: "pip", url: "file:///w/pip.whl", marker: `sys_platform == "linux"`, extras: []string{"x"}},
		{name: "surrounding whitespace", in: " \ta ==1 \t", want: "a==1", key: "a", spec: "==1"},
		{name: "arbitrary equality", in: "a===foo", want: "a===foo", key: "a", spec: "===foo"},
		{name: "wildcard", in: "a==1.0.*", want: "a==1.0.*", key: "a", spec: "==1.0.*"},
		{name: "single character", in: "a", want: "a", key: "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse(c.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.in, err)
			}
			if got := r.String(); got != c.want {
				t.Errorf("String() = %q, want %q", got, c.want)
			}
			if r.Key() != c.key || r.Specifier.String() != c.spec || r.URL != c.url || r.Marker.String() != c.marker || !slices.Equal(r.Extras, c.extras) {
				t.Errorf("parts: key %q spec %q url %q marker %q extras %q; want %q %q %q %q %q",
					r.Key(), r.Specifier.String(), r.URL, r.Marker.String(), r.Extras, c.key, c.spec, c.url, c.marker, c.extras)
			}
			again, err := Parse(r.String())
			if err != nil || again.String() != r.String() {
				t.Errorf("String() %q does not parse back to itself: %q, %v", r.String(), again.String(), err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, in string
		pos      int
		cause    any // the wrapped error's type, nil for none
	}{
		{name: "empty", in: "", pos: 0},
		{name: "no name", in: ">=1", pos: 0},
		{name: "name ends in a separator", in: "a-", pos: 1},
		{name: "version without operator", in: "a 1.0", pos: 2},
		{name: "bad version", in: "a>=x.y", pos: 1, cause: &pep440.ParseError{}},
		{name: "empty clause", in: "a>=1,,<2", pos: 5},
		{name: "clause without operator", in: "a>=1, 2", pos: 6},
		{name: "unclosed parenthesis", in: "a (>=1", pos: 3},
		{name: "unclosed extras", in: "a[x", pos: 3},
		{name: "bad extra", in: "a[-x]", pos: 2},
		{name: "url without scheme", in: "a @ example.com/a.whl", pos: 4},
		{name: "empty url", in: "a @ ", pos: 4},
		{name: "url then specifier", in: "a @ https://x/a.whl >=1", pos: 20},
		{name: "specifier and url", in: "a>=1 @ https://x/a.whl", pos: 1, cause: &pep440.ParseError{}},
		{name: "semicolon without marker", in: "a;", pos: 2, cause: &marker.ParseError{}},
		{name: "bad marker", in: "a; os_name ==", pos: 13, cause: &marker.ParseError{}},
		{name: "unknown marker variable", in: `a; colour == "red"`, pos: 3, cause: &marker.ParseError{}},
		{name: "invalid UTF-8", in: "a\xff", pos: 0},
		{name: "trailing garbage", in: "a (>=1) x", pos: 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse(c.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %q, %v; want a *ParseError", c.in, r.String(), err)
			}
			if pe.Pos != c.pos {
				t.Errorf("Pos = %d, want %d (%v)", pe.Pos, c.pos, err)
			}
			switch c.cause.(type) {
			case nil:
				if pe.Err != nil {
					t.Errorf("wraps %v, want nothing", pe.Err)
				}
			case *pep440.ParseError:
				var ve *pep440.ParseError
				if !errors.As(err, &ve) {
					t.Errorf("wraps %v, want a *pep440.ParseError", pe.Err)
				}
			case *marker.ParseError:
				var me *marker.ParseError
				if !errors.As(err, &me) {
					t.Errorf("wraps %v, want a *marker.ParseError", pe.Err)
				}
			}
		})
	}
}

func FuzzParseRequirement(f *testing.F) {
	for _, s := range []string{
		"httpx==0.27.2", "a (>=1.0,<2)", "a[Z, y]~=1.4; python_version < '3.12'", `idna ; extra == "x"`,
		"pip[x]@file:///w/pip.whl ; sys_platform == 'linux'", "a===foo", "a==1.0.*", "a ( )", "a;", "a @ x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %T", s, err)
			}
			if pe.Pos < 0 || pe.Pos > len(s) {
				t.Fatalf("%q: Pos %d outside the input", s, pe.Pos)
			}
			return
		}
		n := r.String()
		r2, err := Parse(n)
		if err != nil {
			t.Fatalf("%q formats as %q which does not parse: %v", s, n, err)
		}
		if r2.String() != n || r2.Key() != r.Key() || r2.URL != r.URL || !slices.Equal(r2.Extras, r.Extras) {
			t.Fatalf("%q -> %q -> %q", s, n, r2.String())
		}
	})
}

package wheel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/pep503"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

func tagStrings(ts []platform.Tag) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.String())
	}
	return out
}

func TestParseFilename(t *testing.T) {
	for _, tc := range []struct {
		in                  string
		dist, name, version string
		build               string
		tags                []string
	}{
		{"foo-1.0-py3-none-any.whl", "foo", "foo", "1.0", "", []string{"py3-none-any"}},
		{"some_PACKAGE-1.0-py3-none-any.whl", "some_PACKAGE", "some-package", "1.0", "", []string{"py3-none-any"}},
		{"foo-1.0-1000abc-py3-none-any.whl", "foo", "foo", "1.0", "1000abc", []string{"py3-none-any"}},
		{"Flask-3.1.3-py3-none-any.whl", "Flask", "flask", "3.1.3", "", []string{"py3-none-any"}},
		{"package-1!1.0+abc.7-753-py3-none-any.whl", "package", "package", "1!1.0+abc.7", "753", []string{"py3-none-any"}},
		{"foo_bár-1.0-py3-none-any.whl", "foo_bár", "foo-bár", "1.0", "", []string{"py3-none-any"}},
		{"foo-2-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "foo", "foo", "2", "", []string{
			"py2-none-manylinux_2_17_x86_64", "py2-none-manylinux2014_x86_64",
			"py3-none-manylinux_2_17_x86_64", "py3-none-manylinux2014_x86_64"}},
		{"foo-1.2.3-cp315-abi3.abi3t-manylinux_2_17_x86_64.whl", "foo", "foo", "1.2.3", "", []string{
			"cp315-abi3-manylinux_2_17_x86_64", "cp315-abi3t-manylinux_2_17_x86_64"}},
		// more components in a set than ParseFilename's arrays on the stack hold
		{"foo-1-py3-none-manylinux1_x86_64.manylinux2010_x86_64.manylinux_2_12_x86_64.manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "foo", "foo", "1", "", []string{
			"py3-none-manylinux1_x86_64", "py3-none-manylinux2010_x86_64", "py3-none-manylinux_2_12_x86_64",
			"py3-none-manylinux_2_17_x86_64", "py3-none-manylinux2014_x86_64"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			f, err := ParseFilename(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if f.Distribution != tc.dist || f.Name != tc.name || f.Version != tc.version || f.Build != tc.build {
				t.Errorf("got %+v", f)
			}
			if got := tagStrings(f.Tags); !reflect.DeepEqual(got, tc.tags) {
				t.Errorf("tags %v, want %v", got, tc.tags)
			}
			if f.String() != tc.in {
				t.Errorf("String() = %q", f.String())
			}
		})
	}
}

func TestParseFilenameInvalid(t *testing.T) {
	for _, in := range []string{
		"", ".whl", "foo.whl", "foo-1.0.whl", "foo-1.0-py3-none-any.wheel", "foo-1.0-py3-none-any.zip",
		"foo__bar-1.0-py3-none-any.whl", "foo\n-1.0-py3-none-any.whl", "foo#bar-1.0-py3-none-any.whl",
		"-1.0-py3-none-any.whl", "_foo-1.0-py3-none-any.whl", "foo_-1.0-py3-none-any.whl",
		"foobar-1.x-py3-none-any.whl", "foo-1.0-abc-py3-none-any.whl", "foo-1.0-200-py3-none-any-junk.whl",
		"foo-1.0--none-any.whl", "foo-1.0-py3-none-.whl", "foo-1.0-py3.-none-any.whl",
		"foo-1.2.3-1/../../target-py3-none-any.whl", "foo-1.2.3-py3-none-../target.whl",
		"foo-1.2.3-py3-none-..\\target.whl", "foo-1.2.3-py3-none-target:stream.whl",
		"foo-1.2.3-py3-none-freebsd_13_x86/64.whl", "foo-1.2.3-py3-none-unknown tag.whl",
		"foo-1.2.3-py3-none-unknowné.whl", "foo-1.2.3-py3-none-unknown..tag.whl",
		"torch-2.6.0%2Bcpu-cp312-cp312-linux_x86_64.whl", "foo-1.0-py3-none-any.whl\x00",
		"foo-\xff-py3-none-any.whl", "dir/foo-1.0-py3-none-any.whl", "playlyfe-0.1.1-2.7.6-none-any.whl", "foo-1.0-py+3-none-any.whl",
	} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseFilename(in)
			if !errors.Is(err, refusal.WheelInvalid) {
				t.Fatalf("ParseFilename(%q) = %v, want wheel_invalid", in, err)
			}
			// It says what a wheel's name is, for a name an author's
			// build wrote as much as one an index published.
			if !strings.Contains(err.Error(), "its build wrote or its index published (NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl, PEP 427)") {
				t.Errorf("ParseFilename(%q): %v does not say what the name should be", in, err)
			}
		})
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"foo": "foo", "Foo.....Bar": "foo-bar", "foo___bar": "foo-bar", "foo----bar": "foo-bar",
		"_not_legal": "-not-legal", "hi\n": "hi\n", "Foo.Bar": "foo-bar", "a-_.b": "a-b",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			if got := pep503.Normalize(in); got != want {
				t.Errorf("pep503.Normalize(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

// TestConformanceWheelFilenames runs pypa/packaging's, uv's and
// pypa/installer's wheel file name cases. Where packaging and uv
// disagree the case is kind wheel_invalid (uv's, the strict verdict),
// which is the verdict this package gives.
func TestConformanceWheelFilenames(t *testing.T) {
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR not set")
	}
	b, err := os.ReadFile(filepath.Join(dir, "pypa", "wheel_filenames.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Kind     string   `json:"kind"`
			Filename string   `json:"filename"`
			Name     string   `json:"name"`
			Version  string   `json:"version"`
			Tags     []string `json:"tags"`
			Build    []any    `json:"build"`
			Expected any      `json:"expected"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, c := range doc.Cases {
		switch c.Kind {
		case "wheel_valid":
			n++
			f, err := ParseFilename(c.Filename)
			if err != nil {
				t.Errorf("case %d %q: %v", i, c.Filename, err)
				continue
			}
			got := tagStrings(f.Tags)
			sort.Strings(got)
			if f.Name != c.Name || f.Version != c.Version || !reflect.DeepEqual(got, c.Tags) {
				t.Errorf("case %d %q: got %s %s %v, want %s %s %v", i, c.Filename, f.Name, f.Version, got, c.Name, c.Version, c.Tags)
			}
			if (c.Build == nil) != (f.Build == "") {
				t.Errorf("case %d %q: build %q, want %v", i, c.Filename, f.Build, c.Build)
			}
		case "wheel_invalid":
			n++
			if _, err := ParseFilename(c.Filename); !errors.Is(err, refusal.WheelInvalid) {
				t.Errorf("case %d %q: accepted, want wheel_invalid", i, c.Filename)
			}
		case "canonicalize_name":
			n++
			if got := pep503.Normalize(c.Name); got != c.Expected {
				t.Errorf("case %d: pep503.Normalize(%q) = %q, want %q", i, c.Name, got, c.Expected)
			}
		case "is_normalized_name":
			n++
			if got := pep503.Normalize(c.Name) == c.Name; got != c.Expected {
				t.Errorf("case %d: %q normalized = %v, want %v", i, c.Name, got, c.Expected)
			}
		}
	}
	if n == 0 {
		t.Fatal("no cases")
	}
	t.Logf("%d cases", n)
}

func FuzzParseFilename(f *testing.F) {
	for _, s := range []string{
		"foo-1.0-py3-none-any.whl", "foo-1.0-1000abc-py2.py3-none-any.whl", "package-1!1.0+abc.7-753-py3-none-any.whl",
		"foo-1.2.3-py3-none-../target.whl", "foo_bár-1.0-py3-none-any.whl", "-.whl", "a-1-py3.py3-x-y.whl",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fn, err := ParseFilename(s)
		if err != nil {
			if refusal.CodeOf(err) != refusal.WheelInvalid {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(fn.Tags) == 0 || fn.Name == "" {
			t.Fatalf("accepted %q with %+v", s, fn)
		}
		// A parsed name renders back to a name that parses to the same value.
		again, err := ParseFilename(fn.String())
		if err != nil || !reflect.DeepEqual(again, fn) {
			t.Fatalf("round trip %q -> %q: %v", s, fn.String(), err)
		}
	})
}

package wheel

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

func TestParseWheelInfo(t *testing.T) {
	wi, err := parseWheelInfo([]byte("Wheel-Version: 1.0\r\nGenerator: bdist_wheel (0.42.0)\r\nRoot-Is-Purelib: false\r\nTag: cp312-cp312-manylinux_2_17_x86_64\r\nTag: cp312-cp312-manylinux2014_x86_64\r\nBuild: 1\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if wi.WheelVersion != "1.0" || wi.RootIsPurelib || len(wi.Tags) != 2 || wi.Tags[1].Platform != "manylinux2014_x86_64" || wi.Build != "1" || wi.Generator != "bdist_wheel (0.42.0)" {
		t.Errorf("%+v", wi)
	}
	for name, in := range map[string]string{
		"version 2":        "Wheel-Version: 2.0\nRoot-Is-Purelib: true\n",
		"no version":       "Root-Is-Purelib: true\n",
		"version 1":        "Wheel-Version: 1\nRoot-Is-Purelib: true\n",
		"purelib missing":  "Wheel-Version: 1.0\n",
		"purelib yes":      "Wheel-Version: 1.0\nRoot-Is-Purelib: yes\n",
		"two versions":     "Wheel-Version: 1.0\nWheel-Version: 1.1\nRoot-Is-Purelib: true\n",
		"bad tag":          "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none\n",
		"tag with a slash": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-../x\n",
		"not a field":      "Wheel-Version: 1.0\nRoot-Is-Purelib true\n",
		"invalid UTF-8":    "Wheel-Version: 1.0\nGenerator: \xff\nRoot-Is-Purelib: true\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseWheelInfo([]byte(in)); !errors.Is(err, refusal.WheelInvalid) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

func TestParseMetadata(t *testing.T) {
	m, err := parseMetadata([]byte("Metadata-Version: 2.4\nName: Foo.Bar\nVersion: 2.0rc1\nSummary: multi\n  line\nRequires-Dist: a\nRequires-Dist: b>=1; python_version < \"3.12\"\n\nBody: not a header\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Metadata{Name: "Foo.Bar", Version: "2.0rc1", RequiresDist: []string{"a", `b>=1; python_version < "3.12"`}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("%+v", m)
	}
	for _, in := range []string{"Version: 1\n", "Name: x\n", "Name: x\nName: y\nVersion: 1\n", " continued\nName: x\n"} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			if _, err := parseMetadata([]byte(in)); !errors.Is(err, refusal.WheelInvalid) {
				t.Errorf("%q: %v", in, err)
			}
		})
	}
}

func TestParseEntryPoints(t *testing.T) {
	eps, err := parseEntryPoints([]byte("\ufeff# comment\n[console_scripts]\nfoo = pkg.mod:main\nbar=pkg:Cls.run [extra-one, two]\n; other comment\n[pkg.plugins]\nonly-module = pkg.plugin\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]EntryPoint{
		"console_scripts": {{Name: "foo", Module: "pkg.mod", Attr: "main"}, {Name: "bar", Module: "pkg", Attr: "Cls.run", Extras: []string{"extra-one", "two"}}},
		"pkg.plugins":     {{Name: "only-module", Module: "pkg.plugin"}},
	}
	if !reflect.DeepEqual(eps, want) {
		t.Errorf("%+v", eps)
	}
	for name, in := range map[string]string{
		"outside a section": "foo = a:b\n",
		"no equals":         "[console_scripts]\nfoo a:b\n",
		"empty value":       "[console_scripts]\nfoo =\n",
		"duplicate":         "[console_scripts]\nfoo = a:b\nfoo = a:c\n",
		"section twice":     "[a]\n[a]\n",
		"bad section":       "[a\n",
		"bad module":        "[console_scripts]\nfoo = a-b:c\n",
		"bad attr":          "[console_scripts]\nfoo = a:1c\n",
		"empty attr":        "[console_scripts]\nfoo = a:\n",
		"unclosed extras":   "[console_scripts]\nfoo = a:b [x\n",
		"code injection":    "[console_scripts]\nfoo = os:system('rm -rf /')\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseEntryPoints([]byte(in)); !errors.Is(err, refusal.WheelInvalid) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

func TestCheckMemberName(t *testing.T) {
	for _, ok := range []string{"a.py", "pkg/mod.py", "pkg/", "pkg/sub/", "pkg/ü.py", "a..b/c", "...x"} {
		t.Run(ok, func(t *testing.T) {
			if err := checkMemberName(ok); err != nil {
				t.Errorf("%q: %v", ok, err)
			}
		})
	}
	for _, bad := range []string{"", "/a", "../a", "a/../b", "a/..", "./a", "a/./b", "a//b", "a\\b", "C:/x", "c:x", "a\x00b", "a\nb", "\xff", "a/b//", "/"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			if err := checkMemberName(bad); !errors.Is(err, refusal.WheelUnsafePath) {
				t.Errorf("%q: %v", bad, err)
			}
		})
	}
}

func FuzzParseMeta(f *testing.F) {
	for _, s := range []string{
		"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"Name: x\nVersion: 1\nRequires-Dist: a\n\nbody",
		"[console_scripts]\nfoo = a.b:c [x]\n",
		" x\n", "[a]\nb=c:d\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range []func([]byte) error{
			func(b []byte) error { _, err := parseWheelInfo(b); return err },
			func(b []byte) error { _, err := parseMetadata(b); return err },
			func(b []byte) error { _, err := parseEntryPoints(b); return err },
		} {
			if err := p(b); err != nil && refusal.CodeOf(err) != refusal.WheelInvalid {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

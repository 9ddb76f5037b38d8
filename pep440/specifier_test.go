package pep440

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestSpecifierOperators(t *testing.T) {
	// Each row: clause, versions it contains, versions it does not (all with
	// pre-releases allowed, so only the range is tested).
	for _, tc := range []struct {
		spec    string
		in, out []string
	}{
		{">=1.0", []string{"1.0", "1.0+local", "1.0.post1", "2.0a1"}, []string{"0.9", "1.0rc1", "1.0.dev0"}},
		{"<=1.0", []string{"1.0", "1.0.0", "1.0+local", "0.1", "1.0rc1"}, []string{"1.0.post1", "1.0.1"}},
		{"==1.0", []string{"1.0", "1.0.0", "1.0+local"}, []string{"1.0.post1", "1.0a1", "1.0.1"}},
		{"==1.0+abc", []string{"1.0+abc", "1.0.0+ABC"}, []string{"1.0", "1.0+abd"}},
		{"!=1.0", []string{"1.0.post1", "0.9", "1.0a1"}, []string{"1.0", "1.0+local"}},
		{"!=1.0+abc", []string{"1.0", "1.0+abd"}, []string{"1.0+abc"}},
		{"==1.2.*", []string{"1.2", "1.2.0", "1.2.9", "1.2.5.post1+x", "1.2a1", "1.2.dev0"}, []string{"1.3.dev0", "1.3", "1.1.9", "1!1.2"}},
		{"!=1.2.*", []string{"1.3.dev0", "1.1.9"}, []string{"1.2", "1.2.9+x"}},
		{"==1.2.0.*", []string{"1.2", "1.2.0.7"}, []string{"1.2.1.dev0"}},
		{"==1!1.*", []string{"1!1.5"}, []string{"1.5"}},
		// >V excludes V's local versions and post-releases unless V is a post-release.
		{">1.0", []string{"1.0.1", "1.1a1", "2"}, []string{"1.0", "1.0+local", "1.0.post1", "1.0.0.post1", "1.0.post1+x"}},
		{">1.0.post1", []string{"1.0.post2", "1.0.post2.dev0", "1.1"}, []string{"1.0.post1", "1.0.post1+local", "1.0.post1.dev5"}},
		{">1.0a1", []string{"1.0a2", "1.0b1", "1.0"}, []string{"1.0a1", "1.0a1.post1", "1.0a1+x"}},
		{">1.0.dev1", []string{"1.0.dev2", "1.0a1"}, []string{"1.0.dev1", "1.0.dev1+x"}},
		// <V excludes V's pre-releases unless V is a pre-release.
		{"<1.0", []string{"0.9", "0.9.post1", "0.9+x"}, []string{"1.0", "1.0a1", "1.0.dev0"}},
		{"<1.0a2", []string{"1.0a1", "1.0a2.dev1"}, []string{"1.0a2", "1.0"}},
		{"<1.0.post1", []string{"1.0", "1.0.post0", "1.0+x"}, []string{"1.0.post1.dev1", "1.0.post1"}},
		{"<0", nil, []string{"0", "0.dev0"}},
		{"~=2.2", []string{"2.2", "2.3", "2.9.9"}, []string{"3.0", "3.0.dev0", "2.1", "2.2rc1"}},
		{"~=1.4.5", []string{"1.4.5", "1.4.9"}, []string{"1.5", "1.5.dev0", "1.4.4"}},
		{"~=2.2.post3", []string{"2.2.post3", "2.3"}, []string{"2.2", "3.0"}},
		{"~=1.0rc1", []string{"1.0rc1", "1.0", "1.9"}, []string{"1.0b9", "2.0.dev0"}},
		{"===1.0", []string{"1.0"}, []string{"1.0.0", "1.0+x"}},
		// The largest numbers: N+1 bounds do not overflow.
		{">1.0.dev9223372036854775806", nil, []string{"1.0.dev1", "1.0.dev9223372036854775806"}},
		{"~=1.9223372036854775806", []string{"1.9223372036854775806"}, []string{"2.dev0", "1.1"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := ParseSpecifier(tc.spec)
			if err != nil {
				t.Fatalf("%s: %v", tc.spec, err)
			}
			for _, v := range tc.in {
				if !s.Match(v, PrereleasesAllow) {
					t.Errorf("%s should contain %s", tc.spec, v)
				}
				if s.Operator() != "===" && !s.Contains(MustParse(v), true) {
					t.Errorf("%s Contains(%s, true) = false", tc.spec, v)
				}
			}
			for _, v := range tc.out {
				if s.Match(v, PrereleasesAllow) {
					t.Errorf("%s should not contain %s", tc.spec, v)
				}
			}
		})
	}
}

func TestSpecifierParse(t *testing.T) {
	for in, want := range map[string]string{
		"< 2": "<2", " >=1.0 ": ">=1.0", "== 1.0.*": "==1.0.*", "===  foo": "===foo",
		"~=2.0": "~=2.0", "==1.0+LOCAL": "==1.0+LOCAL", "!=v1.0": "!=v1.0",
	} {
		t.Run(in, func(t *testing.T) {
			s, err := ParseSpecifier(in)
			if err != nil || s.String() != want {
				t.Errorf("ParseSpecifier(%q) = %q, %v; want %q", in, s, err, want)
			}
		})
	}
	for _, in := range []string{
		"", "1.0", "=>1.0", "==", "~=1", "~=1.0+x", ">=1.0+x", "<1.0.*", "~=1.0.*",
		"==1.0a1.*", "==1.0+x.*", "==1.0.*.1", "=== a b", "===a;b", "===a)", "==1.0 1", ">= 1.0 ,",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			_, err := ParseSpecifier(in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("ParseSpecifier(%q) = %v, want *ParseError", in, err)
			}
		})
	}
}

func TestSpecifierPrereleasePolicy(t *testing.T) {
	set, err := ParseSpecifierSet(">=1.0")
	if err != nil {
		t.Fatal(err)
	}
	// pypa/packaging 26: contains() accepts an in-range pre-release by default.
	if !set.Match("2.0a1", PrereleasesDefault) || set.Match("2.0a1", PrereleasesExclude) {
		t.Error("default/exclude for a single pre-release")
	}
	if set.WithPrereleases(PrereleasesExclude).Match("2.0a1", PrereleasesDefault) {
		t.Error("explicit set-level exclusion ignored")
	}
	if !set.WithPrereleases(PrereleasesExclude).Match("2.0a1", PrereleasesAllow) {
		t.Error("a call's policy overrides the set's")
	}
	if set.Contains(MustParse("2.0a1"), false) || !set.Contains(MustParse("2.0a1"), true) {
		t.Error("Contains prereleases flag")
	}
	// Filter: pre-releases only when no final release matches, unless mentioned.
	for _, tc := range []struct {
		spec     string
		in, want []string
		p        Prereleases
	}{
		{">=1.0", []string{"1.0", "2.0a1"}, []string{"1.0"}, PrereleasesDefault},
		{">=1.0", []string{"2.0a1", "3.0b1"}, []string{"2.0a1", "3.0b1"}, PrereleasesDefault},
		{">=1.0", []string{"1.0", "2.0a1"}, []string{"1.0", "2.0a1"}, PrereleasesAllow},
		{">=1.0", []string{"2.0a1"}, nil, PrereleasesExclude},
		{">=1.0.dev1", []string{"1.0", "2.0a1"}, []string{"1.0", "2.0a1"}, PrereleasesDefault},
		{"!=1.0a1", []string{"1.0", "2.0a1"}, []string{"1.0"}, PrereleasesDefault},
		{"", []string{"foobar", "1.0a1", "1.0"}, []string{"foobar", "1.0"}, PrereleasesDefault},
		{"", []string{"foobar", "1.0a1"}, []string{"foobar", "1.0a1"}, PrereleasesDefault},
		{">=1.0", []string{"foobar", "1.5"}, []string{"1.5"}, PrereleasesDefault},
		{"===foobar", []string{"foobar", "FOOBAR", "1.0"}, []string{"foobar", "FOOBAR"}, PrereleasesDefault},
	} {
		t.Run(fmt.Sprintf("%q.Filter(%v,%d)", tc.spec, tc.in, tc.p), func(t *testing.T) {
			s, err := ParseSpecifierSet(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Filter(tc.in, tc.p); !slices.Equal(got, tc.want) {
				t.Errorf("%q.Filter(%v, %d) = %v, want %v", tc.spec, tc.in, tc.p, got, tc.want)
			}
		})
	}
	mentions := map[string]bool{">=1.0.dev1": true, "<1.0a1": true, "==1.0.dev1": true, "!=1.0.dev1": false, "==1.0.*": false, ">=1.0": false, "===1.0a1": true, "===foo": false}
	for spec, want := range mentions {
		t.Run("mentions "+spec, func(t *testing.T) {
			s, _ := ParseSpecifier(spec)
			if s.MentionsPrerelease() != want {
				t.Errorf("%s MentionsPrerelease != %v", spec, want)
			}
		})
	}
}

func TestSpecifierSet(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"  ":                   "",
		">1.0, !=2.0":          "!=2.0,>1.0",
		",,>=1,,":              ">=1",
		"==1.0,==1.0.0":        "==1.0",
		"~=1.0,~=1.0.0":        "~=1.0,~=1.0.0",
		"<3 , >=3.9 ,!=3.10.*": "!=3.10.*,<3,>=3.9",
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			s, err := ParseSpecifierSet(in)
			if err != nil || s.String() != want {
				t.Errorf("ParseSpecifierSet(%q) = %q, %v; want %q", in, s, err, want)
			}
		})
	}
	s, _ := ParseSpecifierSet(">=3.9, <3.13, !=3.10.*")
	for v, want := range map[string]bool{"3.9": true, "3.10.4": false, "3.12.7": true, "3.13.0": false, "3.13.0rc1": false, "3.8": false} {
		t.Run("contains "+v, func(t *testing.T) {
			if got := s.Contains(MustParse(v), true); got != want {
				t.Errorf("%s contains %s = %v", s, v, got)
			}
		})
	}
	if len(s.Specifiers()) != 3 || s.IsEmpty() {
		t.Error("Specifiers/IsEmpty")
	}
	empty, _ := ParseSpecifierSet("")
	if !empty.IsEmpty() || !empty.Match("not a version", PrereleasesDefault) || !empty.Contains(MustParse("1.0a1"), true) {
		t.Error("empty set matches everything")
	}
	if s.Match("not a version", PrereleasesAllow) {
		t.Error("a string that is not a version matched a standard clause")
	}
	if _, err := ParseSpecifierSet(">=1.0,foo"); err == nil {
		t.Error("bad clause accepted")
	} else if pe := (*ParseError)(nil); !errors.As(err, &pe) || pe.Input != ">=1.0,foo" {
		t.Errorf("error %v", err)
	}
	var zero Specifier
	if zero.String() != "" || zero.Contains(MustParse("1"), true) || zero.Match("1", PrereleasesAllow) || zero.Filter([]string{"1"}, PrereleasesAllow) != nil {
		t.Error("zero Specifier")
	}
}

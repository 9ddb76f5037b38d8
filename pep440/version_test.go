package pep440

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestParseNormalizes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Leading v, whitespace, case.
		{"v1.0", "1.0"},
		{"V1.0", "1.0"},
		{"  1.0\t\n", "1.0"},
		{"\u202f1.0\u2029", "1.0"},
		{"1.0RC1", "1.0rc1"},
		// Epoch.
		{"1!2.0", "1!2.0"},
		{"0!2.0", "2.0"},
		// Pre-release spellings and separators.
		{"1.0a", "1.0a0"},
		{"1.0alpha1", "1.0a1"},
		{"1.0-alpha.1", "1.0a1"},
		{"1.0beta2", "1.0b2"},
		{"1.0_b_2", "1.0b2"},
		{"1.0c3", "1.0rc3"},
		{"1.0pre3", "1.0rc3"},
		{"1.0preview3", "1.0rc3"},
		{"1.0.rc.3", "1.0rc3"},
		// Post-release spellings, implicit post.
		{"1.0-1", "1.0.post1"},
		{"1.0post", "1.0.post0"},
		{"1.0.r2", "1.0.post2"},
		{"1.0-rev3", "1.0.post3"},
		{"1.0_post_4", "1.0.post4"},
		// Dev releases.
		{"1.0dev", "1.0.dev0"},
		{"1.0-dev-7", "1.0.dev7"},
		{"1.0a1.post2.dev3", "1.0a1.post2.dev3"},
		// Leading zeros dropped.
		{"01.002.0003", "1.2.3"},
		{"1.0a01", "1.0a1"},
		// Local labels: separators become ".", lower case, numbers without zeros.
		{"1.0+Ubuntu-1", "1.0+ubuntu.1"},
		{"1.0+abc_007.X", "1.0+abc.7.x"},
		{"1.0+0", "1.0+0"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			v, err := Parse(tc.in)
			if err != nil {
				t.Errorf("Parse(%q): %v", tc.in, err)
				return
			}
			if got := v.String(); got != tc.want {
				t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
			}
			// Normalized forms are fixed points.
			if w := MustParse(tc.want); w.String() != tc.want || Compare(v, w) != 0 {
				t.Errorf("%q is not a fixed point", tc.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", " ", "french toast", "1.0+", "1.0++", "1.0+a+", "1.0+_x", "1.0+1+1",
		"1. 0", "1 .0", "1.0 a1", "1..0", "1.0.", ".1", "1.0+İ", "١٢٣", "1.0a1.*",
		"1!", "!1", "1.0-", "1.0.post1.post2", "1.0dev1a1",
		"99999999999999999999", // beyond int64: refused (pypa/packaging has no bound)
		"9223372036854775807",  // 2^63-1: refused, so N+1 bounds cannot overflow
	} {
		t.Run(fmt.Sprintf("%q", in), func(t *testing.T) {
			_, err := Parse(in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("Parse(%q) = %v, want *ParseError", in, err)
				return
			}
			if pe.Input != in {
				t.Errorf("ParseError.Input = %q, want %q", pe.Input, in)
			}
		})
	}
}

func TestOrderingChain(t *testing.T) {
	// Each is strictly less than the next (PEP 440's summary order).
	chain := []string{
		"0.dev0", "1.0.dev456", "1.0.dev456+local", "1.0a1", "1.0a1+local", "1.0a2.dev456",
		"1.0a12", "1.0b1.dev456", "1.0b2", "1.0b2.post345.dev456", "1.0b2.post345",
		"1.0rc1.dev456", "1.0rc1", "1.0", "1.0+abc", "1.0+abc.5", "1.0+5", "1.0+5.abc",
		"1.0+6", "1.0.post456.dev34", "1.0.post456", "1.1.dev1", "1.1", "2", "1!0.1",
	}
	for i := range chain {
		for j := range chain {
			a, b := MustParse(chain[i]), MustParse(chain[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(a, b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	sorted := slices.SortedFunc(slices.Values([]Version{MustParse("2"), MustParse("1.0a1"), MustParse("1.0")}), Compare)
	if sorted[0].String() != "1.0a1" || sorted[2].String() != "2" {
		t.Errorf("sorted = %v", sorted)
	}
}

func TestEqualities(t *testing.T) {
	for _, p := range [][2]string{
		{"1.0", "1.0.0"}, {"1", "1.0.0.0"}, {"1.0rc1", "1.0c1"}, {"1.0+01", "1.0+1"},
		{"0", "0.0"}, {"1.0-1", "1.0.post1"}, {"v1!2", "1!2.0"},
	} {
		t.Run(p[0]+"=="+p[1], func(t *testing.T) {
			if !MustParse(p[0]).Equal(MustParse(p[1])) {
				t.Errorf("%s != %s", p[0], p[1])
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	v := MustParse("1!2.3.0rc4.post5.dev6+Ab-7")
	if v.Epoch() != 1 || !slices.Equal(v.Release(), []int64{2, 3, 0}) {
		t.Errorf("epoch/release = %d %v", v.Epoch(), v.Release())
	}
	if l, n, ok := v.Pre(); l != "rc" || n != 4 || !ok {
		t.Errorf("pre = %q %d %v", l, n, ok)
	}
	if n, ok := v.Post(); n != 5 || !ok {
		t.Errorf("post = %d %v", n, ok)
	}
	if n, ok := v.Dev(); n != 6 || !ok {
		t.Errorf("dev = %d %v", n, ok)
	}
	if v.Local() != "ab.7" || v.Public().String() != "1!2.3.0rc4.post5.dev6" || v.BaseVersion() != "1!2.3.0" {
		t.Errorf("local/public/base = %q %q %q", v.Local(), v.Public(), v.BaseVersion())
	}
	if !v.IsPrerelease() || !v.IsPostrelease() || !v.IsDevrelease() {
		t.Error("flags")
	}
	// Release returns a copy.
	r := v.Release()
	r[0] = 99
	if v.Release()[0] != 2 {
		t.Error("Release aliases the version")
	}
	for in, pre := range map[string]bool{"1.0": false, "1.0.dev1": true, "1.0.post1.dev1": true, "1.0.post1": false, "1.0b1": true} {
		t.Run(in, func(t *testing.T) {
			if MustParse(in).IsPrerelease() != pre {
				t.Errorf("%s IsPrerelease != %v", in, pre)
			}
		})
	}
	var zero Version
	if zero.String() != "0" || Compare(zero, MustParse("0.0")) != 0 {
		t.Errorf("zero Version = %q", zero)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	MustParse("nope")
}

// TestNumbersBeyond32Bits: every number of a version is an int64 on every
// GOARCH, so numbers past 2^31 and 2^32 (where a 32-bit int wraps or
// truncates) parse, print and order exactly. GOARCH=386 runs it too.
func TestNumbersBeyond32Bits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		lower, high string
	}{
		{"release past 2^31", "1.2147483647", "1.2147483648"},
		{"release past 2^32", "1.4294967295", "1.4294967296"},
		{"release 2^32 against 0", "1.0", "1.4294967296"},
		{"release near 2^63", "9223372036854775805", "9223372036854775806"},
		{"epoch past 2^32", "4294967296!1", "4294967297!0"},
		{"pre past 2^31", "1.0a2147483648", "1.0a4294967296"},
		{"post past 2^32", "1.0.post4294967295", "1.0.post4294967296"},
		{"dev past 2^32", "1.0.dev4294967296", "1.0.dev4294967297"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := MustParse(tc.lower), MustParse(tc.high)
			if Compare(lo, hi) != -1 || Compare(hi, lo) != 1 || Compare(hi, hi) != 0 {
				t.Errorf("Compare(%s, %s) = %d", lo, hi, Compare(lo, hi))
			}
			if lo.String() != tc.lower || hi.String() != tc.high {
				t.Errorf("round trip: %s %s", lo, hi)
			}
			set, err := ParseSpecifierSet(">" + tc.lower)
			if err != nil {
				t.Fatal(err)
			}
			if !set.Contains(hi, true) || set.Contains(lo, true) {
				t.Errorf(">%s: contains %s = %v, %s = %v", tc.lower, hi, set.Contains(hi, true), lo, set.Contains(lo, true))
			}
		})
	}
	v := MustParse("4294967297!4294967298.1rc4294967299.post4294967300.dev4294967301")
	if e := v.Epoch(); e != 4294967297 {
		t.Errorf("epoch %d", e)
	}
	if r := v.Release(); r[0] != 4294967298 {
		t.Errorf("release %v", r)
	}
	if _, n, _ := v.Pre(); n != 4294967299 {
		t.Errorf("pre %d", n)
	}
	if n, _ := v.Post(); n != 4294967300 {
		t.Errorf("post %d", n)
	}
	if n, _ := v.Dev(); n != 4294967301 {
		t.Errorf("dev %d", n)
	}
	compat, err := ParseSpecifierSet("~=1.4294967296")
	if err != nil {
		t.Fatal(err)
	}
	if !compat.Contains(MustParse("1.4294967297"), false) || compat.Contains(MustParse("2"), false) {
		t.Error("~=1.4294967296 bounds")
	}
}

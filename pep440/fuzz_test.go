package pep440

import "testing"

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{
		"1.0", "v1!2.3.4rc5.post6.dev7+loc.8", "1.0-1", "1.0a", "  1.0 ", "1.0+", "١", "1.0+İ",
		"1.0.post.dev", "99999999999999999999", "0", "1.0_RC_1", "1.0+ab-01_X",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAgainstRegex(t, s)
		v, err := Parse(s)
		if err != nil {
			return
		}
		n := v.String()
		w, err := Parse(n)
		if err != nil {
			t.Fatalf("%q normalizes to %q which does not parse: %v", s, n, err)
		}
		if Compare(v, w) != 0 || w.String() != n {
			t.Fatalf("%q -> %q -> %q", s, n, w.String())
		}
		if Compare(v.Public(), v) > 0 || (v.Local() == "" && Compare(v.Public(), v) != 0) {
			t.Fatalf("%q: public orders after the version", s)
		}
	})
}

func FuzzParseSpecifierSet(f *testing.F) {
	for _, s := range []string{
		"", ">=1.0", ">=1.0,!=1.3.*,<2", "~=2.2.post3", "===foo", "==1.0+abc", " < 2 ", ",,", "==1.0.*.1",
	} {
		f.Add(s, "1.0")
	}
	f.Fuzz(func(t *testing.T, spec, ver string) {
		s, err := ParseSpecifierSet(spec)
		if err != nil {
			return
		}
		n := s.String()
		s2, err := ParseSpecifierSet(n)
		if err != nil {
			t.Fatalf("%q normalizes to %q which does not parse: %v", spec, n, err)
		}
		if s2.String() != n {
			t.Fatalf("%q -> %q -> %q", spec, n, s2.String())
		}
		got := s.Match(ver, PrereleasesAllow)
		if got != s2.Match(ver, PrereleasesAllow) {
			t.Fatalf("%q and its normal form %q disagree on %q", spec, n, ver)
		}
		if v, err := Parse(ver); err == nil {
			if s.Contains(v, true) != s.Match(v.String(), PrereleasesAllow) {
				t.Fatalf("%q: Contains and Match disagree on %q", spec, ver)
			}
		}
		_ = s.Filter([]string{ver, "1.0", "1.0a1"}, PrereleasesDefault)
	})
}

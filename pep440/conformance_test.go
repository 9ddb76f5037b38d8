package pep440

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// loadVectors reads $CRUXPROV_CONFORMANCE_DIR/pypa/<name>.json, skipping
// the test when the variable is unset.
func loadVectors(t *testing.T, name string) []map[string]any {
	t.Helper()
	dir := os.Getenv("CRUXPROV_CONFORMANCE_DIR")
	if dir == "" {
		t.Skip("CRUXPROV_CONFORMANCE_DIR is unset")
	}
	b, err := os.ReadFile(filepath.Join(dir, "pypa", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta  map[string]any   `json:"meta"`
		Cases []map[string]any `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	t.Logf("%s: generated from %v (packaging %v)", name, doc.Meta["generated_from"], doc.Meta["packaging_version"])
	return doc.Cases
}

// tally counts passes and failures per kind and reports them.
type tally struct {
	pass, fail map[string]int
}

func newTally() *tally { return &tally{pass: map[string]int{}, fail: map[string]int{}} }

func (ty *tally) check(t *testing.T, c map[string]any, ok bool, format string, args ...any) {
	t.Helper()
	kind, _ := c["kind"].(string)
	if ok {
		ty.pass[kind]++
		return
	}
	ty.fail[kind]++
	t.Errorf("%s (%v): %s", kind, c["source"], fmt.Sprintf(format, args...))
}

func (ty *tally) report(t *testing.T) {
	t.Helper()
	var kinds []string
	for k := range ty.pass {
		kinds = append(kinds, k)
	}
	for k := range ty.fail {
		if _, ok := ty.pass[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("%-30s pass %4d  fail %d", k, ty.pass[k], ty.fail[k])
	}
}

func str(c map[string]any, k string) string { s, _ := c[k].(string); return s }

func policy(x any) Prereleases {
	switch x {
	case true:
		return PrereleasesAllow
	case false:
		return PrereleasesExclude
	}
	return PrereleasesDefault
}

func strList(x any) []string {
	var out []string
	for _, e := range x.([]any) {
		out = append(out, e.(string))
	}
	return out
}

func TestConformanceVersions(t *testing.T) {
	cases := loadVectors(t, "versions")
	ty := newTally()
	defer ty.report(t)
	for _, c := range cases {
		switch str(c, "kind") {
		case "sorted_ascending":
			vs := strList(c["versions"])
			ok := true
			for i := range vs {
				for j := i + 1; j < len(vs); j++ {
					if Compare(MustParse(vs[i]), MustParse(vs[j])) >= 0 {
						ok = false
						t.Logf("not %s < %s", vs[i], vs[j])
					}
				}
			}
			ty.check(t, c, ok, "order")
		case "compare":
			a, errA := Parse(str(c, "left"))
			b, errB := Parse(str(c, "right"))
			if errA != nil || errB != nil {
				ty.check(t, c, false, "parse: %v %v", errA, errB)
				continue
			}
			got := Compare(a, b)
			var ok bool
			switch str(c, "expected") {
			case "<":
				ok = got < 0
			case "<=":
				ok = got <= 0
			case "==":
				ok = got == 0
			case "!=":
				ok = got != 0
			case ">=":
				ok = got >= 0
			case ">":
				ok = got > 0
			default:
				t.Fatalf("unknown op %q", str(c, "expected"))
			}
			ty.check(t, c, ok, "%s %s %s: Compare=%d", a, str(c, "expected"), b, got)
		case "invalid":
			_, err := Parse(str(c, "version"))
			ty.check(t, c, err != nil, "%q parsed", str(c, "version"))
		case "normalize":
			v, err := Parse(str(c, "version"))
			ty.check(t, c, err == nil && v.String() == str(c, "normalized"), "%q: got %q (%v), want %q", str(c, "version"), v.String(), err, str(c, "normalized"))
		case "valid":
			v, err := Parse(str(c, "version"))
			if err != nil {
				ty.check(t, c, false, "%v", err)
				continue
			}
			ok := true
			for _, attr := range []string{"normalized", "epoch", "release", "pre", "post", "dev", "local", "public", "base_version", "is_prerelease", "is_postrelease", "is_devrelease"} {
				if want, present := c[attr]; present {
					if got := attribute(v, attr); !reflect.DeepEqual(got, want) {
						ok = false
						t.Logf("%s.%s = %#v, want %#v", str(c, "version"), attr, got, want)
					}
				}
			}
			ty.check(t, c, ok, "%q attributes", str(c, "version"))
		case "attribute":
			v, err := Parse(str(c, "version"))
			got := attribute(v, str(c, "attribute"))
			ty.check(t, c, err == nil && reflect.DeepEqual(got, c["expected"]), "%s.%s = %#v, want %#v", str(c, "version"), str(c, "attribute"), got, c["expected"])
		default:
			t.Errorf("unknown kind %q", str(c, "kind"))
		}
	}
}

// attribute returns v's attribute in the JSON shapes of the vectors.
func attribute(v Version, name string) any {
	switch name {
	case "normalized":
		return v.String()
	case "epoch":
		return float64(v.Epoch())
	case "release":
		var out []any
		for _, n := range v.Release() {
			out = append(out, float64(n))
		}
		return out
	case "pre":
		if l, n, ok := v.Pre(); ok {
			return []any{l, float64(n)}
		}
		return nil
	case "post":
		if n, ok := v.Post(); ok {
			return float64(n)
		}
		return nil
	case "dev":
		if n, ok := v.Dev(); ok {
			return float64(n)
		}
		return nil
	case "local":
		if l := v.Local(); l != "" {
			return l
		}
		return nil
	case "public":
		return v.Public().String()
	case "base_version":
		return v.BaseVersion()
	case "is_prerelease":
		return v.IsPrerelease()
	case "is_postrelease":
		return v.IsPostrelease()
	case "is_devrelease":
		return v.IsDevrelease()
	}
	return fmt.Sprintf("unknown attribute %q", name)
}

func TestConformanceSpecifiers(t *testing.T) {
	cases := loadVectors(t, "specifiers")
	ty := newTally()
	defer ty.report(t)
	for _, c := range cases {
		spec := str(c, "specifier")
		switch str(c, "kind") {
		case "specifier_valid":
			_, err := ParseSpecifier(spec)
			ty.check(t, c, err == nil, "%q: %v", spec, err)
		case "specifier_invalid":
			_, err := ParseSpecifier(spec)
			ty.check(t, c, err != nil, "%q parsed", spec)
		case "specifier_normalize":
			s, err := ParseSpecifier(spec)
			ty.check(t, c, err == nil && s.String() == str(c, "normalized"), "%q: got %q (%v)", spec, s.String(), err)
		case "specifierset_normalize":
			s, err := ParseSpecifierSet(spec)
			ty.check(t, c, err == nil && s.String() == str(c, "normalized"), "%q: got %q (%v)", spec, s.String(), err)
		case "specifier_mentions_prerelease":
			s, err := ParseSpecifier(spec)
			ty.check(t, c, err == nil && s.MentionsPrerelease() == c["expected"], "%q: got %v", spec, s.MentionsPrerelease())
		case "specifier_contains":
			s, err := ParseSpecifier(spec)
			if err != nil {
				ty.check(t, c, false, "%q: %v", spec, err)
				continue
			}
			s = s.WithPrereleases(policy(c["specifier_prereleases"]))
			got := s.Match(str(c, "version"), policy(c["contains_prereleases"]))
			ty.check(t, c, got == c["expected"], "%q contains %q (pre %v/%v) = %v", spec, str(c, "version"), c["specifier_prereleases"], c["contains_prereleases"], got)
		case "specifierset_contains":
			s, err := ParseSpecifierSet(spec)
			if err != nil {
				ty.check(t, c, false, "%q: %v", spec, err)
				continue
			}
			s = s.WithPrereleases(policy(c["specifier_prereleases"]))
			p := policy(c["contains_prereleases"])
			item := str(c, "version")
			if c["installed"] == true {
				if v, err := Parse(item); err == nil && v.IsPrerelease() {
					p = PrereleasesAllow
				}
			}
			got := s.Match(item, p)
			ty.check(t, c, got == c["expected"], "%q contains %q (pre %v/%v installed %v) = %v", spec, item, c["specifier_prereleases"], c["contains_prereleases"], c["installed"], got)
		case "specifier_filter":
			s, err := ParseSpecifier(spec)
			if err != nil {
				ty.check(t, c, false, "%q: %v", spec, err)
				continue
			}
			s = s.WithPrereleases(policy(c["specifier_prereleases"]))
			got := s.Filter(strList(c["input"]), policy(c["filter_prereleases"]))
			want := strList(c["expected"])
			ty.check(t, c, equalLists(got, want), "%q filter %v = %v, want %v", spec, c["input"], got, want)
		case "specifierset_filter":
			s, err := ParseSpecifierSet(spec)
			if err != nil {
				ty.check(t, c, false, "%q: %v", spec, err)
				continue
			}
			s = s.WithPrereleases(policy(c["specifier_prereleases"]))
			got := s.Filter(strList(c["input"]), policy(c["filter_prereleases"]))
			want := strList(c["expected"])
			ty.check(t, c, equalLists(got, want), "%q filter %v = %v, want %v", spec, c["input"], got, want)
		default:
			t.Errorf("unknown kind %q", str(c, "kind"))
		}
	}
}

func equalLists(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

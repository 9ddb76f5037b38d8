package pep440

import "testing"

var benchVersions = []string{"1.0", "2.31.0", "1!2.0rc1.post2.dev3+ubuntu.1", "3.12.4", "0.9.8a2", "24.1.1.post1"}

func BenchmarkVersionParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range benchVersions {
			if _, err := Parse(s); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkVersionCompare(b *testing.B) {
	vs := make([]Version, len(benchVersions))
	for i, s := range benchVersions {
		vs[i] = MustParse(s)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for i := range vs {
			n += Compare(vs[i], vs[(i+1)%len(vs)])
		}
	}
	_ = n
}

func BenchmarkSpecifierContains(b *testing.B) {
	set, err := ParseSpecifierSet(">=3.9, <3.14, !=3.10.*")
	if err != nil {
		b.Fatal(err)
	}
	vs := []Version{MustParse("3.12.4"), MustParse("3.10.2"), MustParse("3.8"), MustParse("3.13.0rc1")}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, v := range vs {
			if set.Contains(v, true) {
				n++
			}
		}
	}
	_ = n
}

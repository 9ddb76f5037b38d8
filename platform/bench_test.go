package platform

import "testing"

// BenchmarkTagRanking builds a preset's ranking and ranks a typical
// wheel's compressed tag set against it.
func BenchmarkTagRanking(b *testing.B) {
	p, err := Lookup("cp312-manylinux_2_39_x86_64")
	if err != nil {
		b.Fatal(err)
	}
	wheel, _ := ParseTag("cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64")
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.Ranking()
		}
	})
	r := p.Ranking()
	b.Run("rank", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := r.Best(wheel); !ok {
				b.Fatal("unsupported")
			}
		}
	})
}

// BenchmarkPresetLookup derives a preset's full tag list.
func BenchmarkPresetLookup(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Lookup("cp312-manylinux_2_39_x86_64"); err != nil {
			b.Fatal(err)
		}
	}
}

package manifest

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
)

func BenchmarkParseManifest(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(good)))
	for i := 0; i < b.N; i++ {
		if _, err := Parse([]byte(good), "acme-web-fetch"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspect is what `cruxprov inspect` costs on acme-native (six
// locked wheels): open, verify every member, parse manifest and lock.
func BenchmarkInspect(b *testing.B) {
	s := fixtures.ForTest(b, fixtures.Options{})
	b.ReportAllocs()
	b.SetBytes(s.Native.Size)
	for i := 0; i < b.N; i++ {
		if _, err := Inspect(context.Background(), s.Native.Path); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzIndexLines: the line scanner never panics or loops, whatever it is
// given (Parse only hands it documents the TOML parser accepted).
func FuzzIndexLines(f *testing.F) {
	f.Add(good)
	f.Add("a = [\n[[x]]\n'''")
	f.Add("[a.\"b\\\"c\".'d']\nx = {y = [1, {z = 2}]}")
	f.Fuzz(func(t *testing.T, doc string) {
		ix := indexLines(doc)
		for k, n := range ix {
			if n < 1 || n > len(doc)+1 {
				t.Fatalf("%q at line %d", k, n)
			}
		}
	})
}

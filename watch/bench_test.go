package watch_test

import (
	"context"
	"os"
	"testing"

	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/watch"
)

// BenchmarkCheck is the check before a run: a Verifier's (after its first
// full verify, while nothing changes) beside a fast seal verify, and the
// full verify with every watch placed afresh (what a check costs after an
// event). On the fixture env, and on the corpus env bench/invoke.sh makes
// (CRUXPROV_BENCH_CORPUS_ENV; skipped without it).
func BenchmarkCheck(b *testing.B) {
	b.Run("fixture", func(b *testing.B) {
		f, _ := env(b)
		benchCheck(b, f.Env)
	})
	b.Run("corpus", func(b *testing.B) {
		dir := os.Getenv("CRUXPROV_BENCH_CORPUS_ENV")
		if dir == "" {
			b.Skip("no corpus env: bench/invoke.sh builds the medium corpus and sets CRUXPROV_BENCH_CORPUS_ENV")
		}
		benchCheck(b, dir)
	})
}

func benchCheck(b *testing.B, dir string) {
	ctx := context.Background()
	fast := func(ctx context.Context) error { _, err := seal.Verify(ctx, dir, seal.Options{}); return err }
	b.Run("watched", func(b *testing.B) {
		v := watch.NewVerifier(watch.Spec{Env: dir}, fast)
		defer v.Close()
		if err := v.Verify(ctx); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.Verify(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if v.FullVerifies() != 1 {
			b.Errorf("%d full verifies", v.FullVerifies())
		}
	})
	b.Run("fast-verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := fast(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rearm-and-verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v := watch.NewVerifier(watch.Spec{Env: dir}, fast)
			if err := v.Verify(ctx); err != nil {
				b.Fatal(err)
			}
			v.Close()
		}
	})
}

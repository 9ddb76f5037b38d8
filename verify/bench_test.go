package verify

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/registry"
)

// benchWorld is a governed store made by bench/verify.sh: the home, the
// provider and the executor's state dir (env vars, read in tests only).
func benchWorld(b *testing.B) (reg *registry.Dir, name, state string) {
	home, name := os.Getenv("CRUXPROV_BENCH_HOME"), os.Getenv("CRUXPROV_BENCH_PROVIDER")
	if home == "" || name == "" {
		b.Skip("set CRUXPROV_BENCH_HOME and CRUXPROV_BENCH_PROVIDER (bench/verify.sh prepares a governed store of the medium corpus)")
	}
	reg, err := registry.OpenDir(context.Background(), filepath.Join(home, "registry"))
	if err != nil {
		b.Fatal(err)
	}
	return reg, name, b.TempDir()
}

// BenchmarkVerifyFast is what an executor pays in-process before a run:
// the pin (signatures, threshold, floor) and a fast verify of its env.
func BenchmarkVerifyFast(b *testing.B) {
	reg, name, state := benchWorld(b)
	ctx := context.Background()
	if _, err := Verify(ctx, reg, name, Options{StateDir: state}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Verify(ctx, reg, name, Options{StateDir: state}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyPinOnly is the pin part alone.
func BenchmarkVerifyPinOnly(b *testing.B) {
	reg, name, state := benchWorld(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := registry.VerifyPin(ctx, reg, state, name, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLstatWalk is the peer: a bare walk of the same env that lstats
// every entry (filepath.WalkDir plus one Lstat each).
func BenchmarkLstatWalk(b *testing.B) {
	reg, name, state := benchWorld(b)
	rep, err := Verify(context.Background(), reg, name, Options{StateDir: state})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		filepath.WalkDir(rep.Env, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				if _, err := os.Lstat(p); err == nil {
					n++
				}
			}
			return nil
		})
		if n == 0 {
			b.Fatal("empty env")
		}
	}
}

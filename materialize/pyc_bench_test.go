package materialize

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/seal"
)

// BenchmarkBytecodeWarm is the bytecode stage of a create whose sources
// are all in the pyc cache: pip's ~490 modules read from the cache,
// retargeted and written into a staging env (pure Go, no Python).
// BenchmarkBytecodeCold compiles them all with the interpreter first.
func BenchmarkBytecodeWarm(b *testing.B) { benchBytecode(b, true) }

// BenchmarkBytecodeCold: every source a miss (the cache emptied before
// each run).
func BenchmarkBytecodeCold(b *testing.B) { benchBytecode(b, false) }

func benchBytecode(b *testing.B, warm bool) {
	ctx := context.Background()
	p, in := host(b)
	l, err := LayoutFor(p)
	if err != nil {
		b.Fatal(err)
	}
	whls, _ := filepath.Glob("/usr/share/python-wheels/pip-*.whl")
	if len(whls) == 0 {
		b.Skip("no pip wheel under /usr/share/python-wheels")
	}
	id, err := interpreterIdentity(in)
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	home := filepath.Join(root, "home")
	// Each run writes into a fresh staging env placed as Create places one
	// (mkdirStaging): pycs created where the previous run's were just
	// removed would measure ext4's scan past freed inodes instead.
	n := 0
	var staging string
	var sources []pycSource
	var size int64
	fresh := func() {
		n++
		var err error
		if staging, err = mkdirStaging(filepath.Join(root, "envs", fmt.Sprintf("env-%d", n))); err != nil {
			b.Fatal(err)
		}
		sp := filepath.Join(staging, filepath.FromSlash(l.SitePackages))
		rels := writeSources(b, sp, whls[0])
		sources, size = sources[:0], 0
		for _, r := range rels {
			if strings.HasPrefix(r, "edge/") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(sp, filepath.FromSlash(r)))
			if err != nil {
				b.Fatal(err)
			}
			sources = append(sources, pycSource{rel: l.SitePackages + "/" + r, sum: sha256.Sum256(data), size: int64(len(data))})
			size += int64(len(data))
		}
		py := filepath.Join(staging, filepath.FromSlash(l.Python))
		if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Symlink(in.Path, py); err != nil {
			b.Fatal(err)
		}
		if !warm {
			if err := os.RemoveAll(filepath.Join(home, "cache")); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "envs"), 0o755); err != nil {
		b.Fatal(err)
	}
	run := func() {
		if err := compileBytecode(ctx, filepath.Join(home, PycCacheDir), in, id, staging, "/srv/envs/final", l, sources, 2, func(string, seal.Known) {}); err != nil {
			b.Fatal(err)
		}
	}
	fresh()
	run() // fills the cache
	b.SetBytes(size)
	b.ReportMetric(float64(len(sources)), "sources/op")
	for b.Loop() {
		b.StopTimer()
		fresh()
		b.StartTimer()
		run()
	}
}

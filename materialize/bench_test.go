package materialize

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/seal"
)

// benchRequest stores n synthetic wheels of files members each (a few KiB
// of Python source per member) and returns the request for them.
func benchRequest(b *testing.B, n, members int) (remove func(), create func() *Result) {
	st := newStore(b)
	var ws []lockfile.ResolvedWheel
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("bench%02d", i)
		fn := name + "-1.0-py3-none-any.whl"
		fs := files{}
		for j := 0; j < members; j++ {
			fs[fmt.Sprintf("%s/m%d/f%d.py", name, j%10, j)] = strings.Repeat(fmt.Sprintf("value_%d = %d  # padding\n", j, j), 40+j%100)
		}
		ws = append(ws, putWheel(b, st, fn, wheeltest.Build(b, fn, fs)))
	}
	req := request(b, ws...)
	var last *Result
	remove = func() {
		if last != nil {
			for _, p := range []string{seal.SealPath(last.Dir), seal.StatIndexPath(last.Dir), last.Dir} {
				if err := removeTree(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	create = func() *Result {
		r, err := Create(context.Background(), st, req)
		if err != nil {
			b.Fatal(err)
		}
		last = r
		return r
	}
	return remove, create
}

// BenchmarkCreateNoCompile installs and seals 10 wheels of 200 files,
// each time right after the previous env was removed (as a rebuild, a
// create after gc, or bench/materialize.sh does), with the staging env
// placed in a block group of its own (spread=true, mkdirStaging) and
// without (spread=false, as the cruxprov_nospread build tag makes it).
func BenchmarkCreateNoCompile(b *testing.B) {
	built := spreadStaging
	for _, spread := range []bool{true, false} {
		b.Run(fmt.Sprintf("spread=%v", spread), func(b *testing.B) {
			if spread && !built {
				b.Skip("the placement hints are not built in (not Linux, or the cruxprov_nospread tag)")
			}
			defer func() { spreadStaging = built }()
			spreadStaging = spread
			remove, create := benchRequest(b, 10, 200)
			for b.Loop() {
				b.StopTimer()
				remove()
				b.StartTimer()
				create()
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	_, create := benchRequest(b, 10, 200)
	env := create().Dir
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("deep=%v", deep), func(b *testing.B) {
			for b.Loop() {
				if _, err := seal.Verify(context.Background(), env, seal.Options{Deep: deep}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

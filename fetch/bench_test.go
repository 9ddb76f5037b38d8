package fetch

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cruxible/cruxprov/store"
)

// BenchmarkFetch fetches 30 wheels of the bench corpus's sizes (one of
// 15 MB, a few of 1-5 MB, many small; ~27 MB) from a loopback index into
// an empty store: pages, streamed verification, fsync and rename.
// bench/fetch.sh compares the CLI with curl on the real corpus.
func BenchmarkFetch(b *testing.B) {
	sizes := []int{15044163, 4740323, 2068283, 1231131, 806197, 562592, 384670, 229891, 226450, 215230,
		213508, 140535, 134898, 134872, 131084, 116147, 103421, 90628, 86811, 73076, 68629, 67548, 48170,
		26763, 22558, 19624, 18437, 16234, 11050, 8458}
	rng := rand.New(rand.NewSource(1))
	var fx []wheelFixture
	var total int64
	for i, n := range sizes {
		data := make([]byte, n)
		rng.Read(data)
		name := fmt.Sprintf("pkg%02d", i)
		fx = append(fx, wheelFixture{name, "1.0", name + "-1.0-py3-none-any.whl", data})
		total += int64(n)
	}
	srv := newFaultServer(b, fx, "", "none")
	res := resolution(fx)
	c := client(b, srv.srv.URL)
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := store.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Fetch(context.Background(), st, c, res, Options{})
		if err != nil || rep.Downloaded != len(fx) {
			b.Fatalf("%v %+v", err, rep)
		}
	}
}

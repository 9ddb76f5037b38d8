package wheel

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// benchWheel returns a wheel of 64 members of 128 KiB each (8 MiB),
// half random bytes and half text-like, stored or deflated.
func benchWheel(b *testing.B, deflate bool) ([]byte, int64) {
	b.Helper()
	rng := rand.New(rand.NewSource(1))
	ms := demoRaw()
	var total int64
	for i := range 64 {
		data := make([]byte, 128<<10)
		if i%2 == 0 {
			rng.Read(data)
		} else {
			for j := range data {
				data[j] = "abcdefgh ijklmnop\n"[rng.Intn(18)]
			}
		}
		ms = append(ms, rawMember{name: fmt.Sprintf("demo_pkg/blob%02d.bin", i), data: data, deflate: deflate})
	}
	ms = append(ms, recordFor(ms, "demo_pkg-1.0.dist-info"))
	for _, m := range ms {
		total += int64(len(m.data))
	}
	return rawZip(b, ms), total
}

// BenchmarkVerifyWheel measures Open plus a full streaming Verify
// (inflate, sha256, size checks) in uncompressed MB/s.
func BenchmarkVerifyWheel(b *testing.B) {
	for _, deflate := range []bool{false, true} {
		name := map[bool]string{false: "stored", true: "deflated"}[deflate]
		b.Run(name, func(b *testing.B) {
			data, total := benchWheel(b, deflate)
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				w, err := openBytes(data, demoName)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Verify(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package bytesize

import (
	"fmt"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1: "1 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		30 << 10: "30.0 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestShortNeverZero: a short-of-space message never says "0.0 MiB" for a
// size that is not nothing (the free-space refusal said "has 0.0 MiB
// free" with 30 KiB free), never reads the same on both sides, and its
// shortfall is never written as nothing.
func TestShortNeverZero(t *testing.T) {
	for _, c := range []struct{ have, need int64 }{
		{30 << 10, 60 << 10}, {0, 1}, {1, 2}, {5<<20 + 100, 5<<20 + 200}, {5 << 20, 6 << 20},
		{5<<20 - 1, 5 << 20}, {100 << 20, 100<<20 + 10<<10}, {1 << 30, 1<<30 + 1}, {1023, 1024},
	} {
		t.Run(fmt.Sprintf("have=%d,need=%d", c.have, c.need), func(t *testing.T) {
			h, n, s := Short(c.have, c.need)
			if h == n {
				t.Errorf("%q twice", h)
			}
			for _, x := range []struct {
				text string
				v    int64
			}{{h, c.have}, {n, c.need}, {s, c.need - c.have}} {
				if x.v > 0 && (strings.HasPrefix(x.text, "0.0 ") || x.text == "0 B") {
					t.Errorf("%d written %q", x.v, x.text)
				}
			}
		})
	}
}

// Package bytesize writes byte counts for people: bytes below 1 KiB, else
// KiB, MiB, GiB … with one decimal, in the largest unit that keeps the
// number at 1.0 or more, so that a count is never written "0.0 MiB"
// unless it is nothing at all. It owns the words, not the decisions of
// what to compare.
package bytesize

import (
	"fmt"
	"math"
)

var units = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Format writes n rounded to the nearest tenth of its unit.
func Format(n int64) string { return format(n, math.Round) }

// Short writes have and need for a message that says have is less than
// need ("has HAVE free but needs about NEED, SHORT more"): have rounded
// down, need and the shortfall rounded up, so that the two never read the
// same (both in bytes when even that would) and the shortfall, need -
// have, is never written as nothing. have >= need writes the shortfall "0
// B".
func Short(have, need int64) (h, n, short string) {
	h, n = format(have, math.Floor), format(need, math.Ceil)
	if h == n {
		h, n = fmt.Sprintf("%d B", have), fmt.Sprintf("%d B", need)
	}
	return h, n, format(max(need-have, 0), math.Ceil)
}

func format(n int64, round func(float64) float64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", round(v*10)/10, units[u])
}

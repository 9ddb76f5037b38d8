package lockfile

import (
	"sort"

	"github.com/cruxible/cruxprov/digest"
)

// ResolvedWheel is the one model of a resolved wheel, defined below every
// package that uses it (digest.ResolvedWheel).
type ResolvedWheel = digest.ResolvedWheel

// Resolution is a lock resolved for one platform: packages sorted by name.
type Resolution struct {
	Platform string          `json:"platform"` // the platform's canonical id
	Packages []ResolvedWheel `json:"packages"`
}

// Sort orders the packages by name, as the Resolution's form requires.
func (r *Resolution) Sort() {
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].Name < r.Packages[j].Name })
}

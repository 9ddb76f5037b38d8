// Package platform owns what a target machine is (DESIGN §4): PEP 425 wheel
// tags (with PEP 600 manylinux, PEP 656 musllinux, macOS and Windows
// platform tags), the ordered supported-tag list of a target, the named
// presets, the probe of a host interpreter, and a platform's canonical id
// and canonical JSON form.
//
// It does not read lock files or choose wheels (lockfile/ does), and it
// never runs Python except in the explicit host probe.
package platform

import (
	"fmt"
	"strings"
)

// Tag is one PEP 425 compatibility tag, e.g. cp312-abi3-manylinux_2_17_x86_64.
type Tag struct {
	Interpreter string
	ABI         string
	Platform    string
}

// String renders "interpreter-abi-platform".
func (t Tag) String() string { return t.Interpreter + "-" + t.ABI + "-" + t.Platform }

// ParseTag parses a (possibly compressed, PEP 425) tag set such as
// "py2.py3-none-any" into its tags, expanded interpreter by abi by
// platform in the order written. It is stricter than pypa/packaging,
// because tags end up in file names and paths: every component must be
// non-empty ASCII letters, digits and underscores, and an interpreter
// component must not start with a digit. Duplicates are dropped.
func ParseTag(s string) ([]Tag, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return nil, fmt.Errorf("tag %q: want interpreter-abi-platform", s)
	}
	var comps [3][]string
	for i, p := range parts {
		for _, c := range strings.Split(p, ".") {
			if !validComponent(c, i == 0) {
				return nil, fmt.Errorf("tag %q: invalid component %q", s, c)
			}
			comps[i] = append(comps[i], c)
		}
	}
	out := make([]Tag, 0, len(comps[0])*len(comps[1])*len(comps[2]))
	seen := make(map[Tag]bool, cap(out))
	for _, in := range comps[0] {
		for _, abi := range comps[1] {
			for _, pl := range comps[2] {
				t := Tag{in, abi, pl}
				if !seen[t] {
					seen[t] = true
					out = append(out, t)
				}
			}
		}
	}
	return out, nil
}

func validComponent(c string, interpreter bool) bool {
	if c == "" {
		return false
	}
	if interpreter && c[0] >= '0' && c[0] <= '9' {
		return false
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_') {
			return false
		}
	}
	return true
}

// Ranking maps each supported tag to its rank (0 = most preferred). Build
// one per platform with NewRanking and reuse it for every package.
type Ranking map[Tag]int

// NewRanking ranks tags by their first position in the list.
func NewRanking(tags []Tag) Ranking {
	r := make(Ranking, len(tags))
	for i, t := range tags {
		if _, ok := r[t]; !ok {
			r[t] = i
		}
	}
	return r
}

// Best returns the best (lowest) rank of any of tags, and false when none
// is supported: a wheel's rank, as pypa/packaging's compatible-tags
// selector ranks it.
func (r Ranking) Best(tags []Tag) (int, bool) {
	best, ok := 0, false
	for _, t := range tags {
		if i, hit := r[t]; hit && (!ok || i < best) {
			best, ok = i, true
		}
	}
	return best, ok
}

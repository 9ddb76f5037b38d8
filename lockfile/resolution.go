package lockfile

import (
	"sort"

	"github.com/cruxible/cruxprov/digest"
)

// ResolvedWheel is the one wheel chosen for a package on a platform
// (DESIGN §4). Its identity is Filename and SHA256; URL is only a hint, as
// the pinned index decides where the bytes come from.
type ResolvedWheel struct {
	Name     string        `json:"name"`     // PEP 503 normalized
	Version  string        `json:"version"`  // PEP 440 normalized
	Filename string        `json:"filename"` // percent-decoded wheel file name
	URL      string        `json:"url,omitempty"`
	Size     int64         `json:"size,omitempty"` // 0 when the lock gives none
	SHA256   digest.Digest `json:"sha256"`
}

// Resolution is a lock resolved for one platform: packages sorted by name.
type Resolution struct {
	Platform string          `json:"platform"` // the platform's canonical id
	Packages []ResolvedWheel `json:"packages"`
}

// Sort orders the packages by name, as the Resolution's form requires.
func (r *Resolution) Sort() {
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].Name < r.Packages[j].Name })
}

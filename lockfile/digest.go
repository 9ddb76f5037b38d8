package lockfile

import "github.com/cruxible/cruxprov/digest"

// Digest returns the resolution_digest (DESIGN §5): the sha256 of the
// canonical JSON of {"type":"cruxible.resolution/v1","packages":[{name,
// version, filename, sha256}, …]} sorted by name. URLs and sizes are not
// part of it, so a mirror move does not change it.
func (r Resolution) Digest() (digest.Digest, error) { return digest.ResolutionDigest(r.Packages) }

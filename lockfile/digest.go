package lockfile

import "github.com/cruxible/cruxprov/digest"

// Digest returns the resolution_digest (DESIGN §5): the sha256 of the
// canonical JSON of {"type":"cruxible.resolution/v1","packages":[{name,
// version, filename, sha256}, …]} sorted by name. URLs and sizes are not
// part of it, so a mirror move does not change it.
func (r Resolution) Digest() (digest.Digest, error) {
	pkgs := make([]digest.ResolvedPackage, len(r.Packages))
	for i, p := range r.Packages {
		pkgs[i] = digest.ResolvedPackage{Name: p.Name, Version: p.Version, Filename: p.Filename, SHA256: p.SHA256}
	}
	return digest.ResolutionDigest(pkgs)
}

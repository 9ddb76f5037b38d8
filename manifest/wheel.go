package manifest

import (
	"errors"
	"io/fs"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pep508"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/wheel"
)

// Where a root wheel carries its manifest and lock, relative to its
// .dist-info directory (DESIGN §3).
const (
	ManifestPath = "cruxible/provider.toml"
	LockPath     = "cruxible/pylock.toml"
)

// FromWheel reads <dist-info>/cruxible/provider.toml from the root wheel
// w (verified against RECORD as it is read) and parses it against the
// wheel's distribution name. It returns the manifest and its raw bytes
// (whose digest an accepted pin records). A wheel without the file is
// refusal.ManifestMissing.
func FromWheel(w *wheel.Wheel) (*Manifest, []byte, error) {
	raw, err := readMember(w, ManifestPath, refusal.ManifestMissing, "a provider's root wheel carries its manifest there")
	if err != nil {
		return nil, nil, err
	}
	m, err := Parse(raw, w.Filename().Distribution)
	if err != nil {
		return nil, nil, err
	}
	return m, raw, nil
}

// LockFromWheel returns the raw bytes of <dist-info>/cruxible/pylock.toml
// from the root wheel w, verified against RECORD. A wheel without it is
// refusal.LockMissing. Parsing the lock is lockfile's job.
func LockFromWheel(w *wheel.Wheel) ([]byte, error) {
	return readMember(w, LockPath, refusal.LockMissing, "a provider's root wheel carries its lock there")
}

// Requires parses the root wheel w's own requirements, its METADATA's
// Requires-Dist, in file order. The lock must meet them on every platform
// it is resolved for (lockfile.Options.Requires), so one that does not
// parse is refusal.WheelInvalid: it could not be checked.
func Requires(w *wheel.Wheel) ([]pep508.Requirement, error) {
	var out []pep508.Requirement
	for _, s := range w.Metadata().RequiresDist {
		r, err := pep508.Parse(s)
		if err != nil {
			return nil, refusal.Wrap(refusal.WheelInvalid, err, "%s: METADATA Requires-Dist %q is not a PEP 508 requirement, so the lock cannot be checked against it; rebuild the wheel", w.Filename().String(), s)
		}
		out = append(out, r)
	}
	return out, nil
}

func readMember(w *wheel.Wheel, rel string, missing refusal.Code, hint string) ([]byte, error) {
	name := w.DistInfo() + "/" + rel
	b, err := w.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refusal.New(missing, "%s has no %s: %s", w.Filename().String(), name, hint).WithRemedy(refusal.ActionEmbed, w.Filename().String())
	}
	return b, err
}

// ImplementationDigest is e's implementation digest (DESIGN §5) in the root
// wheel whose sha256 is distribution: the track-record key of the
// entrypoint, the same whichever backend runs it.
func (e Entrypoint) ImplementationDigest(distribution digest.Digest) (digest.Digest, error) {
	d, err := digest.ImplementationDigest(e.Interface.ID, e.Interface.Digest, e.Name, e.Object, distribution)
	if err != nil {
		return digest.Digest{}, refusal.Wrap(refusal.ManifestInvalid, err, "entrypoint %q: cannot compute its implementation digest", e.Name)
	}
	return d, nil
}

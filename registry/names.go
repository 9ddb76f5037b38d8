package registry

import (
	"context"
	"strings"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// Names is what the accepted pins and the open change-sets name, for the
// store's gc (DESIGN §8): the local envs (materialization digests) and
// the wheels (each root package's and each resolved package's sha256).
type Names struct {
	Envs  []digest.Digest
	Blobs []digest.Digest
	// EnvPins and EnvChangeSets say what names each env of Envs (by its
	// materialization digest): the providers whose accepted pins name it,
	// and the open change-sets, so that a refusal to remove it can say
	// which to retire or reject.
	EnvPins       map[digest.Digest][]string
	EnvChangeSets map[digest.Digest][]digest.Digest
}

// NamedBy asks r what its accepted (not retired) pins and its open
// (proposed) change-sets name. It reads the registry's model, never its
// files: a history that names every proposal ever made keeps nothing.
// The pins, the history and the change-sets are read under one shared
// lock (a Dir's), so they are one state: read apart, an approval between
// them named the env it accepted in neither (gc --envs removed it) or
// refused a registry that was not damaged.
func NamedBy(ctx context.Context, r Reader) (*Names, error) {
	release, err := readLock(ctx, r)
	if err != nil {
		return nil, err
	}
	defer release()
	n := &Names{EnvPins: map[digest.Digest][]string{}, EnvChangeSets: map[digest.Digest][]digest.Digest{}}
	add := func(p *Provider, cs *ChangeSet) {
		if p == nil {
			return
		}
		if p.Package != nil {
			n.Blobs = append(n.Blobs, p.Package.SHA256)
		}
		for _, m := range p.Materializations {
			if m.Backend == BackendLocal {
				n.Envs = append(n.Envs, m.Digest)
				if cs == nil {
					n.EnvPins[m.Digest] = append(n.EnvPins[m.Digest], p.Name)
				} else {
					n.EnvChangeSets[m.Digest] = append(n.EnvChangeSets[m.Digest], cs.Metadata.ID)
				}
			}
			for _, w := range m.Packages {
				n.Blobs = append(n.Blobs, w.SHA256)
			}
		}
	}
	pins, err := r.Pins(ctx)
	if err != nil {
		return nil, err
	}
	if err := pinsAsHistory(ctx, r, pins); err != nil {
		return nil, err
	}
	for _, p := range pins {
		add(p.ProviderSpec(), nil)
	}
	css, err := r.ChangeSets(ctx)
	if err != nil {
		return nil, err
	}
	for _, cs := range css {
		if cs.Status.State != StateProposed {
			continue
		}
		for i := range cs.Spec.Changes {
			add(cs.Spec.Changes[i].Provider, cs)
		}
	}
	return n, nil
}

// pinsAsHistory refuses to name what pins name when a provider's pin file
// is not the pin the history accepted (or retired) last: a pin file lost,
// or an older one put back. Before, `gc --envs` removed the env and the
// wheels of the pin the history accepted (nothing named them), and
// `registry repair` then wrote back a pin whose env was gone.
func pinsAsHistory(ctx context.Context, r Reader, pins []*Pin) error {
	log, err := r.Log(ctx)
	if err != nil {
		return err
	}
	last := map[string]Entry{}
	for _, e := range log {
		if e.Event == EventPinAccepted || e.Event == EventPinRetired {
			last[e.Subject] = e
		}
	}
	have := map[string]*Pin{}
	for _, p := range pins {
		have[p.Provider] = p
	}
	for name, e := range last {
		p := have[name]
		if p != nil && (p.Revision > e.Revision || p.Revision == e.Revision && p.SpecDigest == e.Digest && p.Retired == (e.Event == EventPinRetired)) {
			continue // as the history's, or newer (its tail cut off: verify refuses it, and it names its own env)
		}
		what := "lost"
		if p != nil {
			what = "not that pin"
		}
		return refusal.New(refusal.RegistryCorrupt, "the registry's history %s provider %s's pin at revision %d (spec %s, entry %d), but pins/%s.json is %s: nothing can say what the registry names until it is repaired", strings.TrimPrefix(e.Event, "pin-"), name, e.Revision, e.Digest, e.Seq, name, what).WithRemedy(refusal.ActionRepairRegistry, "")
	}
	return nil
}

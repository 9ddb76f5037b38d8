package registry

import (
	"context"

	"github.com/cruxible/cruxprov/digest"
)

// Names is what the accepted pins and the open change-sets name, for the
// store's gc (DESIGN §8): the local envs (materialization digests) and
// the wheels (each root package's and each resolved package's sha256).
type Names struct {
	Envs  []digest.Digest
	Blobs []digest.Digest
}

// NamedBy asks r what its accepted (not retired) pins and its open
// (proposed) change-sets name. It reads the registry's model, never its
// files: a history that names every proposal ever made keeps nothing.
func NamedBy(ctx context.Context, r Reader) (*Names, error) {
	n := &Names{}
	add := func(p *Provider) {
		if p == nil {
			return
		}
		if p.Package != nil {
			n.Blobs = append(n.Blobs, p.Package.SHA256)
		}
		for _, m := range p.Materializations {
			if m.Backend == BackendLocal {
				n.Envs = append(n.Envs, m.Digest)
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
	for _, p := range pins {
		add(p.ProviderSpec())
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
			add(cs.Spec.Changes[i].Provider)
		}
	}
	return n, nil
}

// Package install owns `cruxprov install` (DESIGN §8, §13): from a
// provider's root wheel to a proposed change-set. It reads the manifest,
// checks every entrypoint's interface against the registry, runs the
// pipeline for each platform (a sealed local env where an interpreter
// here runs the platform, the resolution alone elsewhere, for images),
// and proposes a register or update change-set. Nothing an executor runs
// changes until the change-set is approved.
//
// It does not fetch, build or seal itself (package pipeline does), decide
// approvals or write pins (package registry does), print, or read the
// environment.
package install

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/pipeline"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// Options is one install.
type Options struct {
	// Root is the provider's root wheel, read into the store Install is
	// given (pipeline.OpenRoot for a file, pipeline.FetchRoot for
	// NAME==VERSION on the pinned index): its manifest, read once there,
	// is the one checked, installed and proposed.
	Root *pipeline.RootWheel
	// Platforms are preset ids or "host"; Python is the interpreter for
	// the platforms it runs (their envs point at it).
	Platforms []string
	Python    string
	// Client is the pinned index (nil: the store alone, offline).
	Client *index.Client
	// NoCompile, NoCache, Jobs, PlainMalloc: as pipeline.Options.
	NoCompile   bool
	NoCache     bool
	Jobs        int
	PlainMalloc bool
	// Containers are container materializations to propose beside the
	// platforms' (images verified by the caller: container.Materialization);
	// each must name the resolution the pipeline gives its platform
	// (provenance_mismatch otherwise).
	Containers []registry.Materialization
	// ProposedBy names who proposes (metadata only).
	ProposedBy string
	// Warn and Progress receive warnings and stage names.
	Warn     func(string)
	Progress func(stage, platform string)
	// FetchEvents receives each platform's download events, one platform
	// after another (pipeline.Options.FetchEvents): its retries, and a
	// damaged blob fetched again, which were not shown by install.
	FetchEvents func(fetch.Event)
}

// Result is a proposed change-set and what went into it. Its JSON names
// the change-set "changeSet", as registry.TrustResult and ApproveResult do.
type Result struct {
	ChangeSet *registry.ChangeSet `json:"changeSet"`
	// Already is true when ChangeSet, the very change-set this install
	// proposes, was proposed already and is still open: the registry
	// recorded nothing (the same install run again).
	Already  bool               `json:"already"`
	Provider *registry.Provider `json:"provider"`
	// Envs are the sealed local envs built, by platform.
	Envs map[string]string `json:"envs"`
}

// Install runs o against st and proposes the change-set in reg, holding
// the store shared from the first env built until the proposal names it
// (store.GC takes it exclusive, so no gc removes an env in between).
func Install(ctx context.Context, st *store.Store, reg registry.Registry, o Options) (*Result, error) {
	warn := o.Warn
	if warn == nil {
		warn = func(string) {}
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	if len(o.Platforms) == 0 {
		return nil, refusal.New(refusal.PlatformUnsupported, "no platform to install for")
	}
	if o.Root == nil {
		return nil, refusal.New(refusal.ManifestMissing, "install needs a provider's root wheel")
	}
	sum := o.Root.Wheel.SHA256
	// The interfaces are checked before anything is built: an operator
	// who has not registered them yet learns it at once, not after every
	// platform's env (providerOf checks them again with what it proposes).
	if err := checkInterfaces(ctx, reg, o.Root.Manifest); err != nil {
		return nil, err
	}
	// So are a lock without the runtime, for any platform (approved, its
	// pin is one every run refuses runtime_missing; it was built, fetched
	// and proposed, with a warning), and the images given, against each
	// platform's lock resolved alone (nothing fetched or built).
	resolved, err := pipeline.ResolveEach(ctx, st, o.Root, o.Python, o.Platforms)
	if err != nil {
		return nil, err
	}
	if err := pipeline.RequireRuntime(resolved); err != nil {
		if re := (*refusal.Error)(nil); errors.As(err, &re) && re.Code == refusal.RuntimeMissing {
			re.Detail += ", then install the new wheel; nothing was built or proposed"
		}
		return nil, err
	}
	if err := checkContainers(o.Containers, o.Platforms, resolved); err != nil {
		return nil, err
	}
	// The store stays held, shared, until the change-set is proposed: a gc
	// (which holds it exclusive) never sees the envs built here before a
	// proposal names them.
	unlock, err := st.LockShared(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &Result{Envs: map[string]string{}}
	var prov *registry.Provider
	for _, p := range o.Platforms {
		progress("materialize", p)
		po := pipeline.Options{
			Source:   pipeline.Source{Root: o.Root},
			Platform: p, Python: o.Python, Client: o.Client, NoCompile: o.NoCompile, NoCache: o.NoCache, Jobs: o.Jobs, Warn: warn,
			PlainMalloc: o.PlainMalloc, FetchEvents: o.FetchEvents,
		}
		local := p == "host" || runsHere(ctx, st, p, o.Python)
		po.ResolveOnly = !local
		r, err := pipeline.Run(ctx, st, po)
		if err != nil {
			return nil, err
		}
		if prov == nil {
			if prov, err = providerOf(ctx, reg, r, sum); err != nil {
				return nil, err
			}
		}
		m, err := materialization(r, local)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(prov.Materializations, func(x registry.Materialization) bool { return x.Platform == m.Platform && x.Backend == m.Backend }) {
			continue // "host" and its preset id named twice
		}
		prov.Materializations = append(prov.Materializations, m)
		if local {
			res.Envs[m.Platform] = r.Env.Dir
		}
	}
	// The images, checked against these platforms before anything was
	// built (checkContainers).
	prov.Materializations = append(prov.Materializations, o.Containers...)
	action := registry.ActionRegister
	if pin, err := reg.Pin(ctx, prov.Name); err == nil && pin != nil && !pin.Retired {
		action = registry.ActionUpdate
	} else if err != nil && refusal.CodeOf(err) != refusal.PinUnapproved {
		return nil, err
	}
	progress("propose", "")
	cs, already, err := reg.Propose(ctx, registry.Change{Action: action, Provider: prov}, o.ProposedBy)
	if err != nil {
		return nil, err
	}
	res.ChangeSet, res.Provider, res.Already = cs, prov, already
	return res, nil
}

// checkContainers refuses an image whose platform is not among those
// resolved (a config's platforms, or those given, leave out one of an
// image index's), saying which, with the platforms that install them all
// (it named the first image alone, with no way on), and an image built
// from another resolution than the lock gives its platform. Both were
// refused after every platform's env was built.
func checkContainers(containers []registry.Materialization, platforms []string, resolved []*pipeline.Result) error {
	resolution := map[string]digest.Digest{}
	for _, r := range resolved {
		d, err := r.Resolution.Digest()
		if err != nil {
			return err
		}
		resolution[r.Platform] = d
	}
	var missing, missingImages []string
	for _, c := range containers {
		if _, ok := resolution[c.Platform]; !ok && !slices.Contains(missing, c.Platform) {
			missing, missingImages = append(missing, c.Platform), append(missingImages, c.Image)
		}
	}
	if len(missing) > 0 {
		return refusal.New(refusal.PlatformUnsupported, "image %s is for %s, which is not among the platforms installed (%s): install for the platform of every image given, or give only images of the platforms installed",
			strings.Join(missingImages, ", "), strings.Join(missing, ", "), strings.Join(platforms, ", ")).
			WithRemedy(refusal.ActionNamePlatform, strings.Join(append(slices.Clone(platforms), missing...), ","))
	}
	for _, c := range containers {
		if got := resolution[c.Platform]; got != c.Resolution {
			return refusal.New(refusal.ProvenanceMismatch, "image %s was built from resolution %s, the lock resolves to %s for %s", c.Image, c.Resolution, got, c.Platform)
		}
	}
	return nil
}

// runsHere reports whether the interpreter python runs platform id (its
// host platform has that id): then a local env is built for it.
func runsHere(ctx context.Context, st *store.Store, id, python string) bool {
	host, err := pipeline.HostPlatform(ctx, st, python)
	return err == nil && host == id
}

// providerOf is the provider part of the change from the first
// platform's pipeline result: the manifest, its interfaces checked
// against the registry, the implementation digests.
func providerOf(ctx context.Context, reg registry.Reader, r *pipeline.Result, sum digest.Digest) (*registry.Provider, error) {
	m := r.Manifest
	if m == nil || r.Root == nil {
		return nil, refusal.New(refusal.ManifestMissing, "install needs a provider's root wheel")
	}
	if err := checkInterfaces(ctx, reg, m); err != nil {
		return nil, err
	}
	p := &registry.Provider{
		Name:           m.Name,
		Package:        &registry.Package{Name: r.Root.Name, Version: r.Root.Version, Filename: r.Root.Filename, SHA256: sum},
		Protocol:       []int{m.Protocol[0], m.Protocol[1]},
		ManifestDigest: digest.Sum(r.ManifestData),
		LockDigest:     r.LockDigest,
		Secrets:        slices.Clone(m.Secrets),
		Egress:         slices.Clone(m.Egress),
		Budgets:        map[string]int64{},
	}
	if m.Budgets.TimeoutMS > 0 {
		p.Budgets["timeout_ms"] = m.Budgets.TimeoutMS
	}
	if m.Budgets.OutputBytes > 0 {
		p.Budgets["output_bytes"] = m.Budgets.OutputBytes
	}
	for _, e := range m.Entrypoints {
		impl, err := e.ImplementationDigest(sum)
		if err != nil {
			return nil, err
		}
		p.Entrypoints = append(p.Entrypoints, registry.Entrypoint{
			Name: e.Name, Object: e.Object,
			Interface:            registry.InterfaceRef{ID: e.Interface.ID, Digest: e.Interface.Digest},
			ImplementationDigest: impl,
		})
	}
	return p, nil
}

// checkInterfaces checks that the registry knows every interface m's
// entrypoints implement, at the digest they name.
func checkInterfaces(ctx context.Context, reg registry.Reader, m *manifest.Manifest) error {
	ifaces, err := reg.Interfaces(ctx)
	if err != nil {
		return err
	}
	known := map[string]digest.Digest{}
	for _, i := range ifaces {
		known[i.ID] = i.Digest
	}
	// Every interface the registry lacks, at once: one at a time, an
	// operator registered, installed and was refused again per interface.
	var missing []string
	for _, e := range m.Entrypoints {
		if _, ok := known[e.Interface.ID]; !ok && !slices.Contains(missing, e.Interface.ID) {
			missing = append(missing, e.Interface.ID)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return refusal.New(refusal.InterfaceUnregistered, "%s implements interface %s, which the registry does not know; register its schema first", m.Name, missing[0]).WithRemedy(refusal.ActionRegisterInterface, missing[0])
	default:
		return refusal.New(refusal.InterfaceUnregistered, "%s implements interfaces the registry does not know: %s; register each one's schema first", m.Name, strings.Join(missing, ", ")).WithRemedy(refusal.ActionRegisterInterface, "")
	}
	for _, e := range m.Entrypoints {
		if d := known[e.Interface.ID]; d != e.Interface.Digest {
			return refusal.New(refusal.InterfaceDigestMismatch, "entrypoint %q implements %s at %s, but the registry has %s at %s: the provider was built against another schema of %s than the one registered; install a provider built against the registered schema, or one whose manifest names a new interface id for its schema, registered first (a registered id keeps its schema for good)", e.Name, e.Interface.ID, e.Interface.Digest, e.Interface.ID, d, e.Interface.ID)
		}
	}
	return nil
}

// CheckWheelInterfaces is Install's first check of the provider wheel
// at path, run before anything else, with no store: its entrypoints'
// interfaces, each known to reg at the digest the manifest names
// (interface_unregistered naming every one reg lacks, else
// interface_digest_mismatch). A wheel or manifest that cannot be read is
// nil here: the install's own reading of it refuses it, as it says.
// install at a --home that names no store checks against an empty
// registry, so that it refuses without making the store first.
func CheckWheelInterfaces(ctx context.Context, reg registry.Reader, path string) error {
	w, err := wheel.Open(path)
	if err != nil {
		return nil
	}
	defer w.Close()
	m, _, err := manifest.FromWheel(w)
	if err != nil {
		return nil
	}
	return checkInterfaces(ctx, reg, m)
}

// materialization is one platform's entry: a sealed local env, or the
// resolution alone.
func materialization(r *pipeline.Result, local bool) (registry.Materialization, error) {
	res := r.Resolution
	var pkgs []registry.Package
	for _, w := range res.Packages {
		pkgs = append(pkgs, registry.Package{Name: w.Name, Version: w.Version, Filename: w.Filename, SHA256: w.SHA256})
	}
	rd, err := res.Digest()
	if err != nil {
		return registry.Materialization{}, err
	}
	if !local {
		return registry.Materialization{Backend: registry.BackendResolution, Platform: r.Platform, Digest: rd, Resolution: rd, Packages: pkgs}, nil
	}
	s := r.Env.Seal
	cd, err := seal.ContentDigest(s)
	if err != nil {
		return registry.Materialization{}, refusal.Wrap(refusal.SealInvalid, err, "the seal content digest of %s", r.Env.Dir)
	}
	return registry.Materialization{
		Backend: registry.BackendLocal, Platform: r.Platform, Digest: r.Env.Digest, Resolution: rd, Seal: cd, Path: r.Env.Dir,
		Interpreter: registry.InterpreterLabel(s.Interpreter.Path, s.Interpreter.Version, s.Interpreter.SHA256),
		Packages:    pkgs,
	}, nil
}

// ProtocolVersion is the protocol this cruxprov speaks (DESIGN §5).
const ProtocolVersion = buildinfo.ProtocolVersion

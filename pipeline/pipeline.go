// Package pipeline owns the one composition of cruxprov's build side:
// source (a root wheel, a bare lock, or the seal of an env to rebuild) →
// platform → resolve → fetch → materialize → seal, as one call under one
// store lock. `env create`, `fetch`, `install` and `image build` call it;
// cmd/ only turns flags into Options and prints the Result.
//
// It does not own any step: the lock format is lockfile's, the index
// client index's, the store store's, the installer and sealing
// materialize's. It never prints (warnings and progress go to callbacks)
// and never reads the environment.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/fetch"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/manifest"
	"github.com/cruxible/cruxprov/materialize"
	"github.com/cruxible/cruxprov/pipeline/internal/runtimehook"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

// Source is where the resolution comes from: exactly one of its fields.
type Source struct {
	// Root is the provider's root wheel (OpenRoot, FetchRoot, in the
	// store Run is given): its embedded lock is resolved and the root
	// installed too.
	Root *RootWheel
	// LockData is a bare pylock.toml.
	LockData []byte
	// Env is a sealed env (its directory) to rebuild from its own seal:
	// the same resolution, root wheel, interpreter, platform and bytecode.
	Env string
}

// Options is one materialization.
type Options struct {
	Source Source
	// Platform is a preset id or "host" (probed from Python); ignored
	// when PlatformData is set or Source.Env is.
	Platform string
	// PlatformData is a platform in canonical JSON (platform show --json).
	PlatformData []byte
	// Python is the interpreter the env points at (ignored for Source.Env).
	Python string
	// Client is the pinned index; nil fetches nothing (the store alone).
	Client *index.Client
	// FetchOnly stops after fetching (no env).
	FetchOnly bool
	// ResolveOnly stops after resolving: nothing is fetched or built (a
	// platform no interpreter here runs; images build it later).
	ResolveOnly bool
	// Tree, when set, materializes into Tree.Out laid out for Tree.Final
	// (an image's env, materialize.Tree) instead of an env of the store.
	Tree *TreeTarget
	// NoCompile, NoCache, Jobs, PlainMalloc: as materialize.Request.
	NoCompile   bool
	NoCache     bool
	Jobs        int
	PlainMalloc bool
	// Replace rebuilds the env under its digest even when it exists
	// sealed (drifted, say); the old tree is removed once the new one is
	// sealed (materialize.Request.Replace).
	Replace bool
	// FetchEvents and Events receive progress; Warn receives warnings.
	FetchEvents func(fetch.Event)
	Events      func(materialize.Event)
	Warn        func(string)
}

// TreeTarget is where a tree for elsewhere (an image) is made: Out, a new
// directory here, laid out as if at Final.
type TreeTarget struct {
	Out, Final string
	// AnyMachine builds for a platform of another machine (an image for
	// another architecture, see materialize.Request.AnyMachine).
	AnyMachine bool
}

// Result is what the pipeline did.
type Result struct {
	// Env is the sealed env (nil with FetchOnly).
	Env *materialize.Result `json:"-"`
	// Platform is the platform's canonical id; Interpreter its real path.
	Platform    string `json:"platform"`
	Interpreter string `json:"interpreter,omitempty"`
	// Resolution is what was resolved and fetched; Root the root wheel.
	Resolution lockfile.Resolution     `json:"-"`
	Root       *lockfile.ResolvedWheel `json:"-"`
	Fetch      fetch.Report            `json:"-"`
	Prepare    time.Duration           `json:"-"` // source, resolve and fetch
	Manifest   *manifest.Manifest      `json:"-"` // the root wheel's, when there is one
	LockDigest digest.Digest           `json:"-"` // sha256 of the lock's bytes
	// ManifestData is the root wheel's provider.toml, as its bytes.
	ManifestData []byte `json:"-"`

	planned digest.Digest
}

// InputError is an input the caller named that cannot be used as given
// (an unreadable file, a missing env): a usage error, not a refusal that
// blames a wheel or a lock.
type InputError struct {
	What string // e.g. "the env"
	Path string
	Err  error
}

func (e *InputError) Error() string { return fmt.Sprintf("%s %s: %v", e.What, e.Path, e.Err) }
func (e *InputError) Unwrap() error { return e.Err }

// Run runs the pipeline for o into st, holding the store's shared lock
// from the first read to the seal, so that a gc (which takes it
// exclusively) can never delete the wheels between fetch and install.
func Run(ctx context.Context, st *store.Store, o Options) (*Result, error) {
	return run(ctx, st, o, false)
}

// Plan is the materialization digest Run would seal for o (a Tree or an
// env of the store), computed without fetching or building anything: the
// source read and resolved, the interpreter probed (from the probe cache)
// and checked against the platform. A caller that keeps what it built by
// that digest (image build's layer cache) looks it up with Plan first.
// The Result has no Env.
func Plan(ctx context.Context, st *store.Store, o Options) (*Result, digest.Digest, error) {
	if o.FetchOnly || o.ResolveOnly {
		return nil, digest.Digest{}, errors.New("pipeline.Plan: FetchOnly and ResolveOnly build nothing to plan")
	}
	r, err := run(ctx, st, o, true)
	if err != nil {
		return nil, digest.Digest{}, err
	}
	return r, r.planned, nil
}

// run is Run, or Plan with plan (which stops before fetching).
func run(ctx context.Context, st *store.Store, o Options, plan bool) (*Result, error) {
	start := time.Now()
	warn := o.Warn
	if warn == nil {
		warn = func(string) {}
	}
	unlock, err := st.LockShared(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()

	cache := materialize.ProbeCache{Dir: filepath.Join(st.Home(), store.EnvsDir, ".interpreters")}
	r := &Result{}
	var (
		plat      *platform.Platform
		in        *materialize.Probe
		noCompile = o.NoCompile
	)
	if o.Source.Env != "" {
		s, err := sealOf(o.Source.Env)
		if err != nil {
			return nil, err
		}
		if r.Resolution, r.Root, err = fromSeal(s, o.Source.Env); err != nil {
			return nil, err
		}
		if in, err = cache.Interpreter(ctx, s.Interpreter.Path); err != nil {
			return nil, err
		}
		if plat, err = platformOf(ctx, cache, in, s.Materialization.Platform); err != nil {
			return nil, err
		}
		noCompile = !s.Env.Compiled
	} else {
		if in, plat, err = probe(ctx, cache, o); err != nil {
			return nil, err
		}
		lockData := o.Source.LockData
		var lopts lockfile.Options
		if root := o.Source.Root; root != nil {
			if root.closed {
				return nil, fmt.Errorf("pipeline: the root wheel %s was closed before the run", root.Wheel.Filename)
			}
			if root.st.Home() != st.Home() {
				return nil, fmt.Errorf("pipeline: the root wheel %s was read into the store %s, not %s", root.Wheel.Filename, root.st.Home(), st.Home())
			}
			// fetch (and a resolve, a plan) leaves the root wheel out of
			// the store: the env that installs it puts it there.
			if !o.FetchOnly && !o.ResolveOnly && !plan {
				if err := root.put(ctx); err != nil {
					return nil, err
				}
			}
			w := root.Wheel
			lockData, r.Root, r.Manifest, r.ManifestData = root.LockData, &w, root.Manifest, root.ManifestData
			// The lock must meet the root's own requirements here
			// (lock_invalid): an env without one cannot import it.
			lopts.Requires, lopts.Root, lopts.RootWheel = root.Requires, w.Name+" "+w.Version, w.Filename
		}
		r.LockDigest = digest.Sum(lockData)
		lock, warnings, err := lockfile.Parse(lockData)
		if err != nil {
			return nil, err
		}
		if r.Manifest != nil {
			// A wheel embedded by hand is checked here as package embed
			// checks it: resolved, the root was its own dependency.
			if err := manifest.CheckNotInOwnLock(r.Manifest.Name, lock); err != nil {
				return nil, err
			}
		}
		for _, w := range warnings {
			warn(w.String())
		}
		if r.Resolution, err = lockfile.Resolve(lock, plat, lopts); err != nil {
			return nil, err
		}
		if !o.FetchOnly && python.RuntimeOf(r.Resolution.Packages) == "" {
			warn(fmt.Sprintf("the lock has no %s for %s: the env will build, but no provider can run in it (the harness is missing); add the runtime to the provider's lock", manifest.RuntimePackage, plat.ID()))
		}
	}
	r.Platform = plat.ID()
	if in != nil {
		r.Interpreter = in.Path
	}
	if o.ResolveOnly {
		r.Prepare = time.Since(start)
		return r, nil
	}
	if plan {
		req := materialize.Request{Platform: plat, Interpreter: in, Resolution: r.Resolution, RootWheel: r.Root, NoCompile: noCompile}
		if o.Tree != nil {
			req.AnyMachine = o.Tree.AnyMachine
		}
		if r.planned, err = materialize.Digest(ctx, req); err != nil {
			return nil, err
		}
		r.Prepare = time.Since(start)
		return r, nil
	}
	// A rebuild from a seal (env create --replace ENV) given an index
	// fetches the root wheel the seal names too where the store lacks it
	// (a gc took it, or it was damaged and removed): it fetched only the
	// resolution's, and was refused "the root wheel is not in the store;
	// fetch it", its fix line the same command with --index URL again.
	fres := r.Resolution
	if o.Source.Env != "" && r.Root != nil && o.Client != nil {
		fres.Packages = append(slices.Clip(fres.Packages), *r.Root)
	}
	if r.Fetch, err = fetch.Fetch(ctx, st, o.Client, fres, fetch.Options{Jobs: o.Jobs, Offline: o.Client == nil, Events: o.FetchEvents}); err != nil {
		return nil, err
	}
	for _, w := range r.Fetch.Wheels {
		if w.Yanked {
			reason := w.YankedReason
			if reason == "" {
				reason = "no reason given"
			}
			warn(fmt.Sprintf("%s is yanked on the index (%s); it was fetched because the lock pins it", w.Filename, reason))
		}
	}
	r.Prepare = time.Since(start)
	if o.FetchOnly {
		return r, nil
	}
	req := materialize.Request{
		Platform: plat, Interpreter: in, Resolution: r.Resolution, RootWheel: r.Root,
		NoCompile: noCompile, NoCache: o.NoCache, Jobs: o.Jobs, Events: o.Events, Replace: o.Replace,
		PlainMalloc: o.PlainMalloc, Warn: warn, Fetched: r.Fetch.Downloaded + fetchedRoot(o.Source.Root),
	}
	if o.Tree != nil {
		req.AnyMachine = o.Tree.AnyMachine
		r.Env, err = materialize.Tree(ctx, st, req, o.Tree.Out, o.Tree.Final)
	} else {
		r.Env, err = materialize.Create(ctx, st, req)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// probe finds the interpreter and the platform of o. A fetch for a
// preset or a platform file runs no interpreter (in is nil).
func probe(ctx context.Context, cache materialize.ProbeCache, o Options) (in *materialize.Probe, plat *platform.Platform, err error) {
	if !(o.FetchOnly || o.ResolveOnly) || (o.PlatformData == nil && o.Platform == "host") {
		if in, err = cache.Interpreter(ctx, o.Python); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case o.PlatformData != nil:
		plat, err = platform.ParseJSON(o.PlatformData)
	case o.Platform == "host":
		plat, err = cache.Host(ctx, in)
	default:
		plat, err = platform.Lookup(o.Platform)
		if err != nil && platform.CheckID(o.Platform) == nil && (in != nil || o.Python != "") {
			if in == nil { // a fetch or a resolve: the interpreter it names
				if in, _ = cache.Interpreter(ctx, o.Python); in == nil {
					return nil, nil, err
				}
			}
			plat, err = hostOfID(ctx, cache, in, o.Platform, err)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return in, plat, nil
}

// hostOfID is the host platform of the interpreter in when its id is id,
// a platform id that is no preset (notPreset, Lookup's refusal): a host's
// on a glibc newer than the presets', say, which a pin made with
// "host" names, and which the rebuild of its env names (the pin knows
// its id, not the word host). It was refused as no preset, and that
// rebuild could not be run. Another interpreter's is refused naming the
// host platform in has.
func hostOfID(ctx context.Context, cache materialize.ProbeCache, in *materialize.Probe, id string, notPreset error) (*platform.Platform, error) {
	h, err := cache.Host(ctx, in)
	if err != nil {
		return nil, notPreset
	}
	if h.ID() != id {
		return nil, refusal.New(refusal.PlatformUnsupported, "no platform preset %q, nor is it the host platform of %s (%s): name a preset, host, or the interpreter whose host platform it is", id, in.Path, h.ID()).WithRemedy(refusal.ActionPlatformList, "")
	}
	return h, nil
}

// platformOf is the platform an env was sealed for: the interpreter's
// host platform when its id is the sealed one, else the preset of that id.
func platformOf(ctx context.Context, cache materialize.ProbeCache, in *materialize.Probe, id string) (*platform.Platform, error) {
	if p, err := cache.Host(ctx, in); err == nil && p.ID() == id {
		return p, nil
	}
	p, err := platform.Lookup(id)
	if err != nil {
		return nil, refusal.New(refusal.PlatformUnsupported, "the env was sealed for %s, which is neither %s's host platform nor a preset: rebuild it from its wheel or lock with the platform file it was made for", id, in.Path)
	}
	return p, nil
}

// sealOf loads the seal of the env at dir for a rebuild. The env itself
// may be drifted or gone: only the seal is needed, and it must be one
// this version can read whose digest matches its name. An env with no
// seal is refused seal_missing, as env verify refuses it, with the remedy
// of naming its inputs (a seal that cannot be trusted is seal_invalid,
// with the same remedy): nothing else can say what it was made from.
func sealOf(dir string) (*seal.Seal, error) {
	s, err := seal.Load(dir)
	if err != nil {
		if _, serr := os.Lstat(seal.SealPath(dir)); errors.Is(serr, fs.ErrNotExist) {
			what := "the env " + dir
			if _, derr := os.Lstat(dir); errors.Is(derr, fs.ErrNotExist) {
				what += " (its directory is gone too)"
			}
			return nil, refusal.New(refusal.SealMissing, "%s has no seal to rebuild it from: name the inputs it was made from: the root wheel (or the bare lock), the platform and the interpreter (built from the wheels in the store, or from the index, which fetches what the store lacks)", what).WithRemedy(refusal.ActionRebuildEnv, dir)
		}
		return nil, err
	}
	return s, nil
}

// fromSeal is the resolution and root wheel the seal s of the env at dir
// names. A seal that names its root but not the root wheel's file (v1)
// is refused with the rebuild from the inputs it names (RebuildRemedy):
// it said "rebuild it from its wheel", which is what env verify's advice
// (this rebuild) was to do.
func fromSeal(s *seal.Seal, dir string) (lockfile.Resolution, *lockfile.ResolvedWheel, error) {
	res := lockfile.Resolution{Platform: s.Resolution.Platform}
	for _, p := range s.Resolution.Packages {
		res.Packages = append(res.Packages, lockfile.ResolvedWheel{Name: p.Name, Version: p.Version, Filename: p.Filename, SHA256: p.SHA256, Size: p.Size})
	}
	var root *lockfile.ResolvedWheel
	if r := s.Materialization.Root; r != nil {
		if s.Resolution.Root == nil || s.Resolution.Root.SHA256 != r.SHA256 {
			return res, nil, s.RebuildRemedy(refusal.New(refusal.SealInvalid, "the seal names root %s %s but not its wheel file (sealed by an older cruxprov): name its inputs instead: the root wheel, the platform and the interpreter (a new env, named by today's digest of those inputs; the old one stays until the store's unused envs are collected)", r.Name, r.Version), dir)
		}
		w := *s.Resolution.Root
		root = &lockfile.ResolvedWheel{Name: w.Name, Version: w.Version, Filename: w.Filename, SHA256: w.SHA256, Size: w.Size}
	}
	return res, root, nil
}

// HostPlatform is the canonical id of the host platform of the
// interpreter python (probed once, remembered in st's probe cache).
func HostPlatform(ctx context.Context, st *store.Store, python string) (string, error) {
	cache := materialize.ProbeCache{Dir: filepath.Join(st.Home(), store.EnvsDir, ".interpreters")}
	in, err := cache.Interpreter(ctx, python)
	if err != nil {
		return "", err
	}
	p, err := cache.Host(ctx, in)
	if err != nil {
		return "", err
	}
	return p.ID(), nil
}

// ResolveEach resolves root's lock for each of platforms alone, as Run
// resolves it for that platform (ResolveOnly: nothing fetched, built or
// written; "host" probes interp): what `install` and `image build` check
// before they build anything (RequireRuntime, the platforms of the
// images an install is given).
func ResolveEach(ctx context.Context, st *store.Store, root *RootWheel, interp string, platforms []string) ([]*Result, error) {
	var rs []*Result
	for _, p := range platforms {
		// No Warn: the lock's warnings are the caller's own run's to say.
		r, err := Run(ctx, st, Options{Source: Source{Root: root}, Platform: p, Python: interp, ResolveOnly: true})
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// RequireRuntime refuses runtime_missing the first of rs (ResolveEach's)
// whose resolution holds no provider runtime (python.RuntimeOf): an env
// of it would have no harness module, and every run of it is refused so
// before the provider starts (DESIGN §10: every provider depends on the
// runtime). `install` and `image build` ask it before they build
// anything, so that neither proposes a pin nor pushes an image that can
// never run; `env create` builds such an env with Run's warning (a lock
// need not be a provider's). The refusal's detail ends in what the author
// does; the caller adds what it did not do.
func RequireRuntime(rs []*Result) error {
	if runtimehook.NoRuntimeCheck.Load() {
		return nil
	}
	for _, r := range rs {
		if python.RuntimeOf(r.Resolution.Packages) == "" {
			root := "the provider"
			if r.Root != nil {
				root = r.Root.Filename
			}
			return refusal.New(refusal.RuntimeMissing, "the lock of %s resolves no %s for %s: an env of it would have no %s module, and every run of the provider would be refused; add that wheel to the provider's lock and embed the lock in the wheel again (docs/provider-authors.md)",
				root, manifest.RuntimePackage, r.Platform, python.HarnessModule)
		}
	}
	return nil
}

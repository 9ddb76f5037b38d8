package materialize

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/buildinfo"
	"github.com/cruxible/cruxprov/internal/bytesize"
	"github.com/cruxible/cruxprov/internal/flock"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// Request is what to materialize: a resolution for a platform, on an
// interpreter, from wheels already in the store.
type Request struct {
	// Platform is the target; the interpreter must match it.
	Platform *platform.Platform
	// Python is the interpreter to probe (a path; a pyenv shim is fine:
	// the env links to the real executable). Ignored when Interpreter is set.
	Python string
	// Interpreter is the probe of an interpreter made before (optional).
	Interpreter *Probe
	// Resolution lists the wheels; each must be in the store.
	Resolution lockfile.Resolution
	// RootWheel is the provider's root wheel, installed with the
	// resolution (it is not in its own lock, DESIGN §3) and named by the
	// materialization digest; nil for an env made from a bare lock. It
	// must be in the store too.
	RootWheel *lockfile.ResolvedWheel
	// NoCompile skips bytecode compilation.
	NoCompile bool
	// Replace rebuilds the env even when it exists sealed (a drifted env,
	// or one whose interpreter was updated in place): the new tree is
	// built in staging, the old one unsealed and moved aside, the new one
	// committed, and the old one removed only then (DESIGN §6).
	Replace bool
	// NoCache installs every wheel from its archive and compiles all
	// bytecode, neither reading nor writing the store's unpacked-wheel
	// cache (UnpackedCacheDir) or its bytecode cache (PycCacheDir).
	NoCache bool
	// Jobs bounds parallel work (< 1: GOMAXPROCS).
	Jobs int
	// PlainMalloc runs the compile processes with their C library's
	// default malloc settings instead of compileTunables (the switch of a
	// trick: docs/seal.md, "Tricks").
	PlainMalloc bool
	// AnyMachine lets the interpreter's machine differ from the
	// platform's (Tree only: an image for another architecture, whose
	// interpreter is another build at the same path; the host's lays out
	// the venv and compiles bytecode, which do not depend on the
	// machine). Everything else must still match.
	AnyMachine bool
	// Events, when set, receives progress (from several goroutines).
	Events func(Event)
	// Fetched is how many of the wheels the caller downloaded into the
	// store for this create (nothing names them until the env is sealed):
	// the free-space refusal says that they are too few to free only
	// when there are some.
	Fetched int
	// Warn, when set, receives warnings: each damaged unpacked-cache
	// entry found and removed (its bytes not RECORD's, its size wrong,
	// not a regular file). Called from several goroutines.
	Warn func(string)
}

// wheels are every wheel req installs: the resolution's and the root.
func (req Request) wheels() []lockfile.ResolvedWheel {
	all := req.Resolution.Packages
	if req.RootWheel != nil {
		all = append(slices.Clone(all), *req.RootWheel)
	}
	return all
}

// warn sends msg to req.Warn, when set.
func (req Request) warn(msg string) {
	if req.Warn != nil {
		req.Warn(msg)
	}
}

// Event is a progress report.
type Event struct {
	Stage string // probe, lock, install, wheel, compile, seal, done, reused
	Name  string // the wheel's file name for Stage "wheel"
}

// Timings are how long each stage of a Create took. Bytecode is compiled
// while wheels are installed, so Compile is only what is left of it once
// the install is over; CompileCPU is the compile processes' CPU time
// (user+sys, 0 when every pyc came from the cache).
type Timings struct {
	Install    time.Duration `json:"install_ns"` // venv + wheels
	Compile    time.Duration `json:"compile_ns"`
	CompileCPU time.Duration `json:"compile_cpu_ns"`
	Seal       time.Duration `json:"seal_ns"` // freeze, index, commit
}

// Result is a sealed env.
type Result struct {
	Dir        string        `json:"path"`
	Digest     digest.Digest `json:"materialization_digest"`
	TreeDigest digest.Digest `json:"tree_digest"`
	Reused     bool          `json:"reused"` // it existed, sealed, and verified
	// SealedAt is, for an env that was at Dir sealed at another path
	// and intact (copied or moved there with its store: its files name
	// that path, so it works only there), where it was sealed: Create
	// built it again for Dir, under its digest, as a replace does. ""
	// otherwise.
	SealedAt string     `json:"sealed_at,omitempty"`
	Seal     *seal.Seal `json:"-"`
	Timings  Timings    `json:"timings"`
	// Index is the stat index of a tree made by Tree (nil from Create).
	Index *seal.StatIndex `json:"-"`
}

// EnvsDir is the directory of sealed envs below the store's home.
const EnvsDir = store.EnvsDir

// Create materializes req into the store's envs/<hex> (the hex of the local
// materialization digest, DESIGN §5) and seals it, or returns the env that
// is already there, sealed and verified (fast). Two processes creating one
// env coordinate with a flock per digest: one builds, the other waits and
// finds it sealed. The env is built in a staging directory of the store
// and renamed into place only when complete; a failure or ctx cancellation
// removes the staging directory, and debris a crash left is removed by the
// next Create. An interruption (ctx cancelled) returns an error wrapping
// ctx.Err(), never a refusal. Refusals: interpreter_mismatch, materialize_failed (I/O,
// disk space, a wheel missing from the store), hash_mismatch (a blob whose
// bytes are not the resolution's), the wheel codes, install_conflict, and
// a sealed env that fails verification (its verify code).
func Create(ctx context.Context, st *store.Store, req Request) (*Result, error) {
	jobs, emit := req.jobsAndEvents()
	emit(Event{Stage: "probe"})
	req.AnyMachine = false // an env of the store runs here
	in, l, s, err := prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	envs := filepath.Join(st.Home(), EnvsDir)
	dir := filepath.Join(envs, s.Materialization.Digest.Hex())

	unlockStore, err := st.LockShared(ctx) // gc must not remove blobs under us
	if err != nil {
		return nil, err
	}
	defer unlockStore()
	sealedAt := ""
	reuse := func(locked bool) (*Result, bool, error) {
		if _, err := os.Lstat(seal.SealPath(dir)); err != nil {
			return nil, false, nil
		}
		rep, err := seal.Verify(ctx, dir, seal.Options{Jobs: jobs, Locked: locked})
		if err != nil {
			// An intact env sealed at another path (its store copied
			// or moved here) is this request's env laid out for there:
			// it is built again here, where it said to replace it first
			// and then run the create again (env_drift).
			if at := sealedElsewhere(ctx, dir, rep, jobs); at != "" {
				sealedAt = at
				return nil, false, nil
			}
			return nil, true, err
		}
		emit(Event{Stage: "reused"})
		return &Result{Dir: dir, Digest: rep.Digest, TreeDigest: rep.TreeDigest, Reused: true, Seal: rep.Seal}, true, nil
	}
	// A sealed env is never rebuilt or changed (the seal is the commit
	// point), so it is reused without the per-digest lock: a user who can
	// only read the store (an executor) gets it, verified.
	if !req.Replace {
		if r, ok, err := reuse(false); ok {
			return r, err
		}
	}
	emit(Event{Stage: "lock"})
	unlock, err := lockFile(ctx, filepath.Join(envs, "."+s.Materialization.Digest.Hex()+".lock"), "create")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !req.Replace {
		if r, ok, err := reuse(true); ok { // sealed by another process while we waited
			return r, err
		}
	}
	// No seal (or one to replace): whatever is beside dir is debris of a
	// crash, and so is dir itself when it has no seal.
	tmps, _ := filepath.Glob(filepath.Join(envs, "."+s.Materialization.Digest.Hex()+".*.tmp-*"))
	debris := tmps
	if _, err := os.Lstat(seal.SealPath(dir)); err != nil {
		debris = append(debris, dir, seal.StatIndexPath(dir))
	}
	for _, p := range debris {
		if err := removeTree(p); err != nil {
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot remove the unsealed debris %s; remove it by hand", p)
		}
	}
	_, _ = st.CleanStaging(ctx)

	stg, err := st.Stage("env-" + s.Materialization.Digest.Hex()[:16])
	if err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot create a staging directory in the store")
	}
	defer func() {
		if err := stg.Release(); err != nil {
			_ = removeTree(stg.Path)
		}
	}()
	// The staging env's name is stg.Path's random one: ext4 picks the
	// block group of a directory created with the TOPDIR hint
	// (mkdirStaging) from a hash of its name.
	staging := filepath.Join(stg.Path, filepath.Base(stg.Path))
	res := &Result{}
	err = buildAgainIfDamaged(ctx, st, req, jobs, stg.Path, func(req Request) error {
		*res = Result{Dir: dir, Digest: s.Materialization.Digest, SealedAt: sealedAt}
		return build(ctx, st, req, in, l, s, staging, stg.Path, dir, jobs, emit, res, true)
	})
	if err != nil {
		if ctx.Err() != nil {
			// An interruption, not a refusal: whatever failed (a killed
			// compile, a cancelled read) failed because of it.
			return nil, fmt.Errorf("interrupted; nothing was sealed: %w", ctx.Err())
		}
		return nil, err
	}
	if sealedAt != "" {
		req.warn(fmt.Sprintf("%s was sealed at %s (copied or moved here with its store; its files name that path): built again for this path, under its digest", dir, sealedAt))
	}
	emit(Event{Stage: "done"})
	return res, nil
}

// sealedElsewhere is where the env at dir was sealed, when rep (its
// verification, refused) found it sealed at another path and that is
// all that differs from its seal: every difference, collected
// (seal.Options.Explain), is its location. "" otherwise: an env whose
// content, modes or interpreter changed too is refused as drifted, for
// its owner to find out what changed it before replacing it. It runs
// as Locked (the verification before it waited for a writer already).
func sealedElsewhere(ctx context.Context, dir string, rep *seal.Report, jobs int) string {
	if rep == nil || !slices.ContainsFunc(rep.Differences, func(d seal.Difference) bool { return d.Change == seal.Location }) {
		return ""
	}
	all, err := seal.Verify(ctx, dir, seal.Options{Jobs: jobs, Locked: true, Explain: true})
	if err == nil || all == nil || len(all.Differences) == 0 || refusal.CodeOf(err) != refusal.EnvDrift {
		return ""
	}
	at := ""
	for _, d := range all.Differences {
		if d.Change != seal.Location {
			return ""
		}
		at = d.Want
	}
	return at
}

// jobsAndEvents are req's parallelism (< 1: GOMAXPROCS) and its events
// callback (a no-op when unset).
func (req Request) jobsAndEvents() (int, func(Event)) {
	jobs := req.Jobs
	if jobs < 1 {
		jobs = runtime.GOMAXPROCS(0)
	}
	return jobs, func(e Event) {
		if req.Events != nil {
			req.Events(e)
		}
	}
}

// Digest is the materialization digest Create or Tree would seal for
// req, computed without building: the interpreter probed (unless given)
// and checked against the platform (with req.AnyMachine as Tree takes
// it), the seal's inputs hashed. Nothing is read from the store.
func Digest(ctx context.Context, req Request) (digest.Digest, error) {
	_, _, s, err := prepare(ctx, req)
	if err != nil {
		return digest.Digest{}, err
	}
	return s.Materialization.Digest, nil
}

// prepare is what Create and Tree do before building: the interpreter
// (probed unless given), checked against the platform, the venv layout,
// and the seal's inputs (the materialization digest among them).
func prepare(ctx context.Context, req Request) (*Probe, Layout, *seal.Seal, error) {
	in := req.Interpreter
	if in == nil {
		var err error
		if in, err = ProbeInterpreter(ctx, req.Python); err != nil {
			return nil, Layout{}, nil, err
		}
	}
	if err := in.checkPlatform(req.Platform, req.AnyMachine); err != nil {
		return nil, Layout{}, nil, err
	}
	l, err := LayoutFor(req.Platform)
	if err != nil {
		return nil, Layout{}, nil, refusal.Wrap(refusal.PlatformUnsupported, err, "cannot materialize locally")
	}
	s, err := sealInputs(req, in, l)
	if err != nil {
		return nil, Layout{}, nil, err
	}
	return in, l, s, nil
}

// sealInputs fills the seal's materialization and resolution parts.
func sealInputs(req Request, in *Probe, l Layout) (*seal.Seal, error) {
	s := &seal.Seal{Format: seal.Format, Tool: buildinfo.Tool()}
	for _, w := range req.Resolution.Packages {
		w.URL = "" // where it came from is not part of the env
		s.Resolution.Packages = append(s.Resolution.Packages, w)
	}
	rd, err := digest.ResolutionDigest(s.Resolution.Packages)
	if err != nil {
		return nil, refusal.Wrap(refusal.LockInvalid, err, "the resolution cannot be hashed")
	}
	pid := req.Platform.ID()
	if req.Resolution.Platform != "" && req.Resolution.Platform != pid {
		return nil, refusal.New(refusal.PlatformUnsupported, "the resolution is for %s, not %s; resolve the lock for this platform", req.Resolution.Platform, pid)
	}
	var root *digest.Root
	if r := req.RootWheel; r != nil {
		for _, p := range req.Resolution.Packages {
			if p.Name == r.Name {
				return nil, refusal.New(refusal.DuplicatePackage, "the root distribution %s is also in its own lock; remove it from the lock", r.Name)
			}
		}
		root = &digest.Root{Name: r.Name, Version: r.Version, SHA256: r.SHA256}
		rw := *r
		rw.URL = ""
		s.Resolution.Root = &rw
	}
	bytecode := digest.BytecodeUncheckedHash
	if req.NoCompile {
		bytecode = ""
	}
	md, err := digest.LocalMaterializationDigest(pid, in.Interpreter, rd, root, bytecode)
	if err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "the materialization digest cannot be computed")
	}
	s.Resolution.Digest, s.Resolution.Platform = rd, pid
	s.Materialization = seal.Materialization{Digest: md, Platform: pid, Interpreter: in.Interpreter, Resolution: rd}
	if bytecode != "" {
		s.Materialization.Bytecode = &bytecode
	}
	s.Materialization.Root = root
	s.Env = seal.Env{Python: l.Python, SitePackages: l.SitePackages, Compiled: !req.NoCompile}
	return s, nil
}

// build does the work of Create in staging, then commits it to dir. The
// caches' new entries are written in cacheTmp, a directory of the store
// (so that they are renamed into the cache on its file system; "" when
// the store cannot be written: they are read, none is written).
func build(ctx context.Context, st *store.Store, req Request, in *Probe, l Layout, s *seal.Seal, staging, cacheTmp, dir string, jobs int, emit func(Event), res *Result, commit bool) error {
	t0 := time.Now()
	emit(Event{Stage: "install"})
	all := req.wheels()
	// What the wheels unpack to (their central directories: no member is
	// read) is checked against the free space before anything is written
	// (DESIGN §14); a create the check refuses leaves the disk as it found
	// it. The wheels are opened in full while the first are installed.
	// The tree goes where staging is: the store for an env, the output
	// directory for an image's tree (Tree), which may be another file
	// system.
	where := filepath.Dir(staging)
	var sfs unix.Statfs_t
	if err := unix.Statfs(where, &sfs); err != nil {
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot check free space in %s", where)
	}
	wheels, order, need, err := sizeWheels(ctx, st, all, req.NoCache, sfs.Bsize, jobs)
	defer closeAll(wheels)
	defer closeCache(wheels)
	if err != nil {
		return err
	}
	if cacheTmp == "" {
		need.cache = usage{}
	}
	// Beside the members: the venv, staging, seal and caches' own entries
	// (createEntries), and, compiling into the cache, a pack and its
	// distribution's directory per wheel under the interpreter's key.
	need.tree = need.tree.plus(usage{bytes: createEntries * (max(sfs.Bsize, 512) + 256), files: createEntries})
	compile := !req.NoCompile
	if compile && cacheTmp != "" && !req.NoCache {
		need.cache = need.cache.plus(usage{files: 2 + 2*int64(len(all))})
	}
	// Bytecode is weighed whenever the create compiles: with --no-cache
	// too, whose pycs go into the env all the same (it was left out).
	if err := checkDisks(where, cacheTmp, st.Home(), need, compile, req.Fetched); err != nil {
		// A wheel that is none (a bomb declaring sizes it cannot have) is
		// refused as such, not for the disk those sizes would take.
		if werr := parallel(ctx, len(all), jobs, func(i int) error {
			_, err := readWheel(wheels[i].f, wheels[i].size, all[i])
			return err
		}); werr != nil {
			return werr
		}
		return err
	}
	// The staging env and the venv, then the wheels' members.
	// From here on a full disk, or one out of inodes, is said as such
	// (diskFull) wherever it strikes: the check passed, so another
	// process took the room meanwhile, or the estimate missed. Until the
	// install and bytecode are over the caches' new entries (need.cache)
	// are written too: leaving them out is advised with freeing space.
	writesCache := need.cache != (usage{})
	staging, err = mkdirStaging(staging)
	if err != nil {
		return diskFull(where, st.Home(), writesCache, compile, refusal.Wrap(refusal.MaterializeFailed, err, "cannot create the staging env"))
	}
	scripts, err := writeVenv(staging, dir, in, l)
	if err != nil {
		return diskFull(where, st.Home(), writesCache, compile, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lay out the venv"))
	}
	ins := newInstaller(staging, dir, l)
	ins.reserve(append(scripts, "pyvenv.cfg", "lib64", l.Python, l.Bin+"/python3", l.Bin+"/"+l.PythonXY)...)
	// Bytecode is compiled while the wheels are installed: each batch of
	// members hands its sources to the stage as soon as they are on disk.
	var bc *bytecodeRun
	var written func([]pycSource) error
	if !req.NoCompile {
		// The interpreter's identity keys the pyc cache; the seal reuses it.
		if s.Interpreter, err = interpreterIdentity(in); err != nil {
			return err
		}
		pycCache := filepath.Join(st.Home(), filepath.FromSlash(PycCacheDir))
		if req.NoCache {
			pycCache = ""
		}
		bc = newBytecodeRun(ctx, pycCache, cacheTmp, in, s.Interpreter, staging, dir, l, jobs, ins.record)
		bc.pool.env = compileEnv(!req.PlainMalloc)
		bc.b.claim = ins.claimPyc
		bc.prestart(all)
		written = bc.add
		defer bc.abort() // a no-op once finished; else nothing writes into staging after build returns
	}
	if err := installWheels(ctx, st, ins, all, wheels, order, req.NoCache, cacheTmp, jobs, emit, req.warn, written); err != nil {
		return diskFull(where, st.Home(), writesCache, compile, err)
	}
	commitCache(st.Home(), wheels)
	t1 := time.Now()
	res.Timings.Install = t1.Sub(t0)
	// What the install wrote is final but where bytecode goes: it is
	// frozen while the bytecode is compiled, so that sealing the env once
	// that is over only has the sources' directories left to do.
	fz := seal.NewFreezer(staging, jobs)
	frozen := func() error { return nil }
	if bc != nil {
		if roots, known := ins.finalSubtrees(); len(roots) > 0 {
			done := make(chan error, 1)
			go func() { done <- fz.Subtrees(ctx, roots, known) }()
			var err error
			waited := false
			frozen = func() error {
				if !waited {
					err, waited = <-done, true
				}
				return err
			}
			defer frozen() // nothing touches staging after build returns
		}
		emit(Event{Stage: "compile"})
		// Every source the install wrote went to the stage already; this
		// only makes sure (a source written otherwise would be here).
		var rest []pycSource
		ins.mu.Lock()
		for rel, k := range ins.known {
			if ins.isSource(rel) && !bc.taken(rel) {
				rest = append(rest, pycSource{rel: rel, sum: k.SHA256, size: k.Size})
			}
		}
		ins.mu.Unlock()
		err := bc.add(rest)
		if err == nil {
			err = bc.finish()
		}
		res.Timings.CompileCPU = bc.cpu
		if err != nil {
			// A disk filled while the bytecode was written is said as
			// the install's is, with the same remedies.
			return diskFull(filepath.Dir(staging), st.Home(), writesCache, compile, err)
		}
	}
	t2 := time.Now()
	res.Timings.Compile = t2.Sub(t1)
	emit(Event{Stage: "seal"})
	if s.Interpreter.SHA256.IsZero() {
		if s.Interpreter, err = interpreterIdentity(in); err != nil {
			return err
		}
	}
	err = frozen()
	var ix *seal.StatIndex
	if err == nil {
		ix, err = fz.Finish(ctx, ins.known)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return diskFull(filepath.Dir(staging), st.Home(), false, compile, refusal.Wrap(refusal.MaterializeFailed, err, "cannot seal the env"))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The packs were written while the env was sealed.
	packed := func() {
		if bc != nil {
			bc.wait()
		}
	}
	if !commit {
		s.SetTree(ix)
		s.Env.Location = dir // the path the tree is laid out for (final), not out
		// staging is the directory mkdirStaging made (it may have another
		// name than the one asked for): the tree's home.
		res.Dir, res.TreeDigest, res.Seal, res.Index = staging, s.Tree.Digest, s, ix
		packed()
		res.Timings.Seal = time.Since(t2)
		return nil
	}
	var aside string
	if fi, lerr := os.Lstat(dir); req.Replace && lerr == nil && !fi.IsDir() {
		// Not a tree (a file put at its name): out of the way first. A
		// tree is exchanged with the new one in one step (seal.Commit).
		if aside, err = moveAside(dir, false); err != nil {
			return refusal.Wrap(refusal.MaterializeFailed, err, "cannot move the env being replaced out of the way")
		}
	}
	replaced, err := seal.Commit(staging, dir, s, ix)
	if replaced != "" {
		// The old tree, which providers started before the exchange may
		// still run from: their open files stay theirs, their new opens
		// find the new tree, of the same content.
		_ = removeTree(replaced) // debris the next create removes if this fails
	}
	if err != nil {
		// The seal and stat index are the last files written: a disk
		// filled (or out of inodes) by then is said as the install's is.
		return diskFull(where, st.Home(), false, compile, refusal.Wrap(refusal.MaterializeFailed, err, "cannot commit the sealed env"))
	}
	if aside != "" {
		_ = removeTree(aside) // debris the next create removes if this fails
	}
	packed()
	res.Timings.Seal = time.Since(t2)
	res.TreeDigest, res.Seal = s.Tree.Digest, s
	return nil
}

// opened is a wheel and the store file it reads (OpenReader does not own it).
type opened struct {
	w     *wheel.Wheel
	f     *os.File
	size  int64
	cache *cacheSlot // the wheel's unpacked-cache entry, nil without the cache
}

func closeAll(ws []opened) {
	for _, o := range ws {
		if o.f != nil {
			o.f.Close()
		}
	}
}

// parallel runs fn(0..n-1) on at most jobs goroutines; the first error
// (by index) wins and cancels the rest.
func parallel(ctx context.Context, n, jobs int, fn func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// createEntries is what a create writes beside the wheels' members, which
// sizeWheels does not count: the staging directory and its lock file (2),
// the venv's own entries (writeVenv: the env, bin, include and its
// pythonX.Y, lib, lib/pythonX.Y, site-packages, lib64, pyvenv.cfg,
// .gitignore, three or four interpreter links and four activate scripts:
// 17), the seal and stat index (2), the env's lock file, the
// unpacked cache's directories and the interpreters cache's entry (5).
// Counted as inodes they were ~25 of a small env's ~60, and a create on a
// file system short of inodes passed the check and ran out half-way.
const createEntries = 26

// checkDisks checks the free space for a tree staged in dir and for the
// cache entries written in cacheTmp: as one need when both are on one
// file system (an env staged in the store), else each on its own (an
// image's tree on another file system than the store's).
func checkDisks(dir, cacheTmp, home string, n diskNeed, compile bool, fetched int) error {
	if n.cache == (usage{}) || sameFS(dir, cacheTmp) {
		return checkDisk(dir, home, n.tree, n.cache, compile, fetched)
	}
	if err := checkDisk(dir, home, n.tree, usage{}, compile, fetched); err != nil {
		return err
	}
	return checkDisk(cacheTmp, home, usage{}, n.cache, compile, fetched)
}

// sameFS reports whether a and b are on one file system (true when either
// cannot be stat'ed: the check then weighs both needs together, as before
// the cache had a directory of its own).
func sameFS(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return true
	}
	return sa.Dev == sb.Dev
}

// checkDisk refuses when the file system holding dir (the store's home,
// where the env is staged) has less free space than tree and cache need,
// what the wheels unpack to in whole blocks and the unpacked-cache
// entries the install will write (sizeWheels), plus half again for
// bytecode when compiling, or fewer free inodes than the files and
// directories they make, with a pyc and a __pycache__ per module when
// compiling (a file system that reports no inode count, as btrfs, is not
// checked for them). It runs before anything is written (build).
//
// Where the tree alone would fit, the refusal says so and its remedy is
// the create without the store's caches (ActionNoCache), with freeing
// space (ActionGC) as the other: the cache's entries are what does not
// fit, and leaving them out builds the same env.
//
// fetched is how many wheels the create downloaded (Request.Fetched):
// the refusal says they are too few to free only when there are some
// (it said so of a create that had fetched nothing).
func checkDisk(dir, home string, tree, cache usage, compile bool, fetched int) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot check free space in %s", dir)
	}
	weigh := func(n usage) (bytes, files int64) {
		bytes, files = n.bytes, n.files
		if compile {
			bytes += bytes / 2
			files += n.modules
		}
		return bytes, files
	}
	bytes, files := weigh(tree.plus(cache))
	treeBytes, treeFiles := weigh(tree)
	outside := outsideStore(home, dir)
	freeFiles := int64(min(sfs.Ffree, 1<<62))
	inodesOK := func(files int64) bool { return sfs.Files == 0 || freeFiles >= files }
	free := int64(sfs.Bavail) * sfs.Bsize
	// Without the cache's entries the create fits: say so, and advise it.
	freeing := freeingRemedy(home)
	withoutCache := func(r *refusal.Error, cacheTakes string) *refusal.Error {
		if cache == (usage{}) || free < treeBytes || !inodesOK(treeFiles) {
			return r.WithRemedy(freeing, "")
		}
		r.Detail += "; or create it without the store's caches, whose new entries " + cacheTakes + ": the env without them fits (it is the same env)"
		return r.WithRemedy(refusal.ActionNoCache, "").OrRemedy(freeing, "")
	}
	if free < bytes {
		// Never "0.0 MiB": bytesize writes each in the unit that fits.
		f, n, short := bytesize.Short(free, bytes)
		if outside {
			return refusal.New(refusal.MaterializeFailed, "the file system of %s has %s free but the tree needs about %s, %s more; free some space there or build elsewhere", dir, f, n, short)
		}
		var fetchedNote string
		switch {
		case fetched == 1:
			fetchedNote = " (the wheel this create fetched, which nothing names yet, is too little to free and is fetched again)"
		case fetched > 1:
			fetchedNote = fmt.Sprintf(" (the %d wheels this create fetched, which nothing names yet, are too few to free and are fetched again)", fetched)
		}
		return withoutCache(refusal.New(refusal.MaterializeFailed, "the file system of the store %s has %s free but the env needs about %s, %s more; free some space and retry%s%s", home, f, n, short, envsHold(home, "it"), fetchedNote), "take about "+bytesize.Format(bytes-treeBytes)+" of that")
	}
	if !inodesOK(files) {
		if outside {
			return refusal.New(refusal.MaterializeFailed, "the file system of %s has %d inodes free but the tree makes about %d files and directories; remove files there or build elsewhere (df -i shows inodes)", dir, sfs.Ffree, files)
		}
		return withoutCache(refusal.New(refusal.MaterializeFailed, "the file system of the store %s has %d inodes free but the env makes about %d files and directories; remove files there and retry (df -i shows inodes)%s", home, sfs.Ffree, files, envsHold(home, "them")), fmt.Sprintf("make %d of them", files-treeFiles))
	}
	return nil
}

// envsHold is what a short-disk refusal of the store at home says holds
// the space (it, or them, the inodes): the sealed envs no accepted pin or
// open change-set names, where the store has a sealed env; where it has
// none (a fresh store) it blamed envs that were not there, and says so.
func envsHold(home, it string) string {
	if m, _ := filepath.Glob(seal.SealPath(filepath.Join(home, store.EnvsDir, "*"))); len(m) > 0 {
		return ": the sealed envs no accepted pin or open change-set names are what hold " + it
	}
	return ": the store holds no sealed env, so other files on its file system hold " + it + "; or create the env in a store on another file system, one with room"
}

// freeingRemedy is the remedy that frees room for a create short of it
// in the store at home: gc of the sealed envs nothing names (ActionGC)
// where the store has one, else a store on another file system
// (ActionOtherHome): gc --envs lists nothing in a store with no env, and
// the wheels a create fetched, all plain gc removes, are fetched again.
func freeingRemedy(home string) refusal.Action {
	if m, _ := filepath.Glob(seal.SealPath(filepath.Join(home, store.EnvsDir, "*"))); len(m) > 0 {
		return refusal.ActionGC
	}
	return refusal.ActionOtherHome
}

// lockFile takes an exclusive flock on path, polling so that ctx cancels.
// doing is what the lock is for ("create", "remove"), for the advice of
// a store that cannot be written.
func lockFile(ctx context.Context, path, doing string) (func(), error) {
	for {
		unlock, current, err := lockFileOnce(ctx, path, doing)
		if err != nil || current {
			return unlock, err
		}
		// Removed (env remove unlinks the lock of the env it removed)
		// while this process waited on it: lock the file now there.
		unlock()
	}
}

// unlockAndRemove is a removal's release of the env lock at path: the lock
// file is unlinked while it is held (so that it does not outlive the env;
// lockFile and withEnvLock take a lock only on the file the path still
// names), then released.
func unlockAndRemove(path string, unlock func()) {
	_ = os.Remove(path)
	unlock()
}

// lockFileOnce takes an exclusive flock on the file at path (made if
// missing), polling so that ctx cancels, and reports whether path still
// names that file once it is held.
func lockFileOnce(ctx context.Context, path, doing string) (func(), bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	// "or in a store of your own" is for a create: an env of this store
	// is removed from this store or not at all.
	elsewhere := ", or in a store of your own"
	if doing == "remove" {
		elsewhere = ""
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, false, refusal.Wrap(refusal.MaterializeFailed, err, "the store is not writable by this user; %s the env as the store's owner%s", doing, elsewhere)
	}
	if errors.Is(err, unix.EROFS) {
		if doing == "remove" {
			return nil, false, refusal.Wrap(refusal.MaterializeFailed, err, "the store's file system is mounted read-only; remount it read-write to remove the env")
		}
		return nil, false, refusal.Wrap(refusal.MaterializeFailed, err, "the store's file system is mounted read-only; remount it read-write to %s the env, or use a store of your own", doing)
	}
	if err != nil {
		return nil, false, refusal.Wrap(refusal.MaterializeFailed, err, "cannot open the env lock %s", path)
	}
	// Readable by the store's readers whatever the umask: a verify that
	// fails waits on it for a writer (seal.Verify). Not this user's: left.
	_ = f.Chmod(0o644)
	switch err := flock.Wait(ctx, int(f.Fd()), unix.LOCK_EX, nil); {
	case err == nil:
		held, herr := f.Stat()
		now, nerr := os.Lstat(path)
		return func() { f.Close() }, herr == nil && nerr == nil && os.SameFile(held, now), nil
	case err == ctx.Err():
		f.Close()
		return nil, false, fmt.Errorf("interrupted while waiting for another process creating the same env: %w", err)
	default:
		f.Close()
		return nil, false, refusal.Wrap(refusal.MaterializeFailed, err, "cannot lock %s", path)
	}
}

// removeTree removes p (a file or a tree, possibly read-only); a missing p
// is fine.
func removeTree(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// moveAside moves the tree of the env at dir out of the way: it is
// renamed to a debris name (".<hex>.old.tmp-*") that the next create
// removes should this process die before it does. It returns the debris
// path, or "" when there was no tree (deleted by hand).
//
// For a removal (unseal), the seal goes first (from then on nothing
// verifies the old tree as sealed), then the stat index. A replacement
// moves only what is not a tree (a file at the env's name; a tree is
// exchanged in one step by seal.Commit) and keeps the seal and index
// until seal.Commit renames the new ones over them: the seal names what
// to rebuild, so a process killed in between leaves an env that `env
// create --replace` still rebuilds.
func moveAside(dir string, unseal bool) (string, error) {
	if unseal {
		for _, p := range []string{seal.SealPath(dir), seal.StatIndexPath(dir)} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
		}
		if err := syncParent(dir); err != nil {
			return "", err
		}
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	aside, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old.tmp-")
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return aside, os.Rename(dir, filepath.Join(aside, "env"))
	}
	// Moving a directory needs write permission on it (its ".." entry).
	if err := os.Chmod(dir, 0o755); err != nil {
		return aside, err
	}
	return aside, os.Rename(dir, filepath.Join(aside, "env"))
}

func syncParent(p string) error {
	d, err := os.Open(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Remove deletes the sealed env at dir (envs/<hex> of st) whatever its
// state: its seal first (so that nothing verifies it from then on), then
// its stat index and tree, under the env's lock so that no create of the
// same digest runs meanwhile. Whether an accepted pin still names it is
// the caller's to check. A dir that is not below st's envs is refused.
// Once ctx is cancelled nothing more is removed (an error wrapping
// ctx.Err(), the env left as it was): a caller removing many envs stops
// at the next one. Removing a tree that was begun is finished (it takes
// as long as the file system needs to unlink one env), so an interruption
// leaves no half-removed tree.
func Remove(ctx context.Context, st *store.Store, dir string) error {
	envs := filepath.Join(st.Home(), EnvsDir)
	dir = filepath.Clean(dir)
	if filepath.Dir(dir) != filepath.Clean(envs) {
		return refusal.New(refusal.MaterializeFailed, "%s is not an env of the store %s", dir, st.Home())
	}
	if _, err := digest.ParseHex(filepath.Base(dir)); err != nil {
		return refusal.New(refusal.MaterializeFailed, "%s is not named by a materialization digest", dir)
	}
	lock := filepath.Join(envs, "."+filepath.Base(dir)+".lock")
	unlock, err := lockFile(ctx, lock, "remove")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		unlock()
		return fmt.Errorf("interrupted; the env %s was not removed: %w", dir, err)
	}
	aside, err := moveAside(dir, true)
	if err == nil && aside != "" {
		err = removeTree(aside)
	}
	if err != nil {
		unlock()
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot remove the env %s", dir)
	}
	// The env gone, its lock goes too (it piled up, one per env removed).
	unlockAndRemove(lock, unlock)
	return nil
}

// Tree materializes req into out, a directory that must not exist yet,
// laid out as if it lived at final: the path it will have where it runs
// (inside an image, say), which scripts' shebangs, pyvenv.cfg and the
// bytecode's file names name. The tree is frozen read-only like a sealed
// env, and the Result carries its seal document (tree digest and counts
// filled in) and stat index, but nothing is committed: out is not an env
// of the store and has no seal file. The interpreter (req.Python or
// req.Interpreter) must be where final's venv will find it (the same
// path and X.Y), since the venv links to it and compiles with it. The
// store's shared lock must be held by the caller (the pipeline holds it).
func Tree(ctx context.Context, st *store.Store, req Request, out, final string) (*Result, error) {
	jobs, emit := req.jobsAndEvents()
	in, l, s, err := prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(final) || filepath.Clean(final) != final {
		return nil, refusal.New(refusal.MaterializeFailed, "the env's final path %q is not an absolute clean path", final)
	}
	if err := os.Mkdir(out, 0o700); err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot create %s", out)
	}
	// The caches' new entries are written in the store, to be renamed into
	// it: out may be on another file system (a rename cannot cross one). A
	// store this process cannot write gets none.
	cacheTmp := ""
	if stg, err := st.Stage("tree-caches"); err == nil {
		defer func() {
			if err := stg.Release(); err != nil {
				_ = removeTree(stg.Path)
			}
		}()
		cacheTmp = stg.Path
	}
	res := &Result{}
	err = buildAgainIfDamaged(ctx, st, req, jobs, out, func(req Request) error {
		*res = Result{Dir: out, Digest: s.Materialization.Digest}
		return build(ctx, st, req, in, l, s, filepath.Join(out, "env"), cacheTmp, final, jobs, emit, res, false)
	})
	if err != nil {
		_ = removeTree(out)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return nil, err
	}
	return res, nil
}

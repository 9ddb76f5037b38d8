package materialize

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/wheel"
)

// PycCacheDir is the bytecode cache below the store's home:
// cache/pyc/<cache key hex>/<distribution>/<wheel file name>.pycs, one
// pack per wheel and interpreter holding the pycs of its sources
// (pycpack.go; docs/seal.md, "Bytecode"). Deleting it is always safe.
const PycCacheDir = "cache/pyc"

// compileScript compiles the sources it is sent on stdin, batch by
// batch, exactly as py_compile.compile(file, dfile=…,
// invalidation_mode=UNCHECKED_HASH) does (SourceFileLoader.source_to_code,
// importlib.util.source_hash, _code_to_hash_pyc). A batch is a mode byte
// ("c": cache, "d": direct), a length (4 bytes, little-endian) and that
// many bytes of NUL-terminated pairs (the file to read, the final path to
// record). For each pair, in order, it answers one record: a kind byte,
// the length (4 bytes, little-endian) and the pyc; a batch's answers go to
// stdout in one write, and it exits at the end of stdin (os._exit: a create
// need not wait for the interpreter's teardown). So one process serves
// a whole create, compiling each wheel's sources as soon as it is
// installed (compilePool).
//
// In cache mode a source is compiled with dfile = the placeholder
// (argv[1]) and answered "P", unless the placeholder could be anything
// else than its file name (it is in the source, in a constant, or not
// exactly once in the pyc): then it is compiled with its final path and
// answered "D", as every source is in direct mode. A source that does not
// compile is skipped, as pip skips it (Python 2 test data in some wheels):
// "N" when the failure is a property of the source (SyntaxError,
// ValueError for null bytes, UnicodeError), "X" otherwise (RecursionError,
// MemoryError: not cached). An I/O error fails the run.
//
// Before 3.11, marshal flags an object for back-references when its
// reference count is above one, so whether a name used once in a module
// is flagged depended on what else the compiling process held: py_compile
// wrote different bytes for one source after different imports, and the
// bytecode of an env depended on which files shared a compile process.
// There the script holds an extra reference to every str of the code
// while it marshals it (pinStrings), so that every str is flagged, as
// 3.11 and later flag every interned one: the bytes depend on the source
// and its path only.
const compileScript = pinStrings + `
from importlib.machinery import SourceFileLoader
from importlib.util import source_hash
from importlib._bootstrap_external import _code_to_hash_pyc
ph = sys.argv[1]
tok = ph.encode()
inp, out = sys.stdin.buffer, sys.stdout.buffer
def mentions(k):
    if isinstance(k, str):
        return ph in k
    if isinstance(k, bytes):
        return tok in k
    if isinstance(k, (tuple, frozenset)):
        return any(mentions(x) for x in k)
    if hasattr(k, "co_consts"):
        return any(mentions(x) for x in k.co_consts)
    return False
def pyc(loader, data, dfile):
    code = loader.source_to_code(data, dfile, _optimize=-1)
    keep = pin(code, [])
    return code, _code_to_hash_pyc(code, source_hash(data), False)
# No code object outlives its answer: marshal marks an object shared
# (FLAG_REF) by its reference count, and one left alive changes the
# counts the next compile sees (a frozenset constant written without the
# flag), so a pyc would depend on what was compiled before it in this
# process, as py_compile's, which drops each, does not.
def answer(f, final, direct):
    loader = SourceFileLoader("<py_compile>", f)
    data = loader.get_data(f)
    try:
        if not direct and tok not in data:
            code, b = pyc(loader, data, ph)
            if b.count(tok) == 1 and not mentions(code):
                return b"P", b
            code = None
            if FORK:
                return b"R", b""  # compiled again directly, in a fresh child
        return b"D", pyc(loader, data, final)[1]
    except (SyntaxError, ValueError, UnicodeError):
        return b"N", b""
    except Exception:
        return b"X", b""
# CPython 3.12 keeps state across compiles that outlives the code
# objects (a frozenset constant two functions share is merged or not
# depending on what this process compiled before), so there each source
# is compiled in a child forked from this process, which compiles
# nothing itself: every compile starts from the same state.
import os
FORK = sys.version_info[:2] == (3, 12)
def forked(f, final, direct):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        kind, b = answer(f, final, direct)
        m = memoryview(kind + b)
        while m:
            m = m[os.write(w, m):]
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 1 << 20)
        if not c:
            break
        chunks.append(c)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    res = b"".join(chunks)
    if status != 0 or not res:
        return b"X", b""
    return res[:1], res[1:]
while True:
    head = inp.read(5)
    if len(head) < 5:
        break
    direct = head[:1] == b"d"
    a = inp.read(int.from_bytes(head[1:], "little")).decode("utf-8", "surrogateescape").split("\0")
    ans = []
    for f, final in zip(a[0::2], a[1::2]):
        if FORK:
            kind, b = forked(f, final, direct)
            if kind == b"R":
                kind, b = forked(f, final, True)
        else:
            kind, b = answer(f, final, direct)
        ans.append(kind + len(b).to_bytes(4, "little"))
        ans.append(b)
    out.write(b"".join(ans))
    out.flush()
# Every answer is written: exit without tearing the interpreter down (its
# heap of code objects), which the create would wait for.
sys.stderr.flush()
os._exit(0)
`

// pinStrings defines pin(code, keep): before 3.11 it appends every str
// object of code (names, constants, file names, recursively) to keep and
// returns it; from 3.11 on it does nothing. Before 3.11 it also interns
// the 256 one-character latin-1 strings first: they are singletons, and
// whether marshal writes one as interned depended on whether anything in
// the process had interned it before.
const pinStrings = `import sys
if sys.version_info < (3, 11):
    for i in range(256):
        sys.intern(chr(i))
def pin(k, keep):
    if sys.version_info >= (3, 11):
        return keep
    if isinstance(k, str):
        keep.append(k)
    elif isinstance(k, (tuple, frozenset)):
        for x in k:
            pin(x, keep)
    elif hasattr(k, "co_consts"):
        for x in (k.co_filename, k.co_name) + k.co_names + k.co_varnames + k.co_freevars + k.co_cellvars + k.co_consts:
            pin(x, keep)
    return keep
`

// pycSource is a .py file of site-packages to compile.
type pycSource struct {
	rel  string   // env-relative path
	sum  [32]byte // sha256 of its bytes (the installer's, checked against RECORD)
	size int64
	pack string // its wheel's pack below the cache key's directory ("" keeps none)
}

// packName is the pack of the wheel named file of the distribution dist
// (normalized): <dist>/<file>.pycs, or "" for names that would not be
// plain file names.
func packName(dist, file string) string {
	if dist == "" || file == "" || dist == "." || dist == ".." || strings.ContainsAny(dist+file, "/\\\x00") {
		return ""
	}
	return dist + "/" + file + pycPackExt
}

// bytecode is the bytecode stage of one create: it writes
// __pycache__/<name>.<cache tag>.pyc beside every source of site-packages,
// from the store's pyc cache where it can (pure Go: read, check, rewrite
// the file name, write) and compiling the rest with the env's own
// interpreter, which fills the cache.
type bytecode struct {
	staging, final string
	python         string // the staging env's bin/python
	pyName         string // the env's python as messages name it
	tag            string
	magic          []byte
	key            [32]byte
	cache          string // cache/pyc/<key hex> below the store's home
	tmpDir         string // where packs are written before they are renamed into the cache: in the store ("": none)
	record         func(rel string, k seal.Known)
	dirs           sync.Map     // env-relative __pycache__ directory → *dirOnce
	dirFDs         atomic.Int32 // descriptors the dirs hold

	// claim, when set, claims a pyc's env-relative path before it is
	// written, and reports false when a wheel claimed it first (a wheel
	// that ships it): that pyc is kept in deferred and written when the
	// install is over, replacing the wheel's, as py_compile replaces it.
	claim    func(rel string) bool
	mu       sync.Mutex
	deferred []deferredPyc
}

// deferredPyc is a pyc to write once the install is over.
type deferredPyc struct {
	rel string // the source's
	pyc []byte
}

// dirOnce is a __pycache__ directory, made once, and an O_PATH
// descriptor of it (fd < 0: none kept) to create its pycs relative to.
type dirOnce struct {
	once sync.Once
	fd   int
	err  error
}

// maxPycDirFDs bounds the __pycache__ descriptors a create keeps open.
const maxPycDirFDs = 2048

// bytecodeRun is the bytecode stage of one create, run alongside the
// install: add takes the sources of each batch of members as soon as
// they are written, installs from the pyc cache those it has (pure Go)
// and queues the rest on the compile processes, which start at the first
// miss or before it (prestart; a warm create starts no Python) and
// compile while the install goes on; finish waits for the last answers and writes the packs that
// gained entries. Every pyc is written __pycache__/<name>.<cache tag>.pyc
// beside its source as the env's interpreter (in) compiles it:
// unchecked-hash, co_filename the final path (final + "/" + rel),
// PYTHONHASHSEED=0, no -O; each is reported to record (size and sha256,
// for the seal). id is the interpreter's identity (part of the cache
// key). cacheDir is the store's PycCacheDir; "" compiles every source
// with its final path and neither reads nor writes a cache, as does an
// interpreter the rewrite is not verified on (pycRewriteVerified).
type bytecodeRun struct {
	b        *bytecode
	ctx      context.Context
	jobs     int
	useCache bool
	initErr  error // why this interpreter cannot compile (refused at the first source)
	pool     *compilePool

	mu      sync.Mutex
	added   map[string]bool       // sources taken (env-relative)
	packs   map[string]*packState // by pack name
	missing []string              // packs prestart did not find
	done    bool                  // finished or aborted: packs closed
	cpu     time.Duration

	packing sync.WaitGroup // the packs finish writes
}

// packState is one wheel's pack in a create: the pack as it was (own),
// the packs of the distribution's other versions (searched when own
// lacks a source), the entries taken from either, and the new pack
// (w), started at the first entry compiled.
type packState struct {
	name    string
	ownOnce sync.Once
	own     *pycPack
	sibOnce sync.Once
	sibs    []*pycPack

	mu   sync.Mutex
	hits []packHit
	w    *packWriter
	wErr bool // a new pack could not be started: keep none
}

// packHit is an entry a create took from a pack.
type packHit struct {
	p   *pycPack
	src [32]byte
	e   packEntry
}

func newBytecodeRun(ctx context.Context, cacheDir, tmpDir string, in *Probe, id seal.InterpreterIdentity, staging, final string, l Layout, jobs int, record func(rel string, k seal.Known)) *bytecodeRun {
	b := &bytecode{
		staging: staging, final: final,
		python: filepath.Join(staging, filepath.FromSlash(l.Python)), pyName: l.Python,
		tag: in.CacheTag, record: record, tmpDir: tmpDir,
	}
	r := &bytecodeRun{b: b, ctx: ctx, jobs: max(jobs, 1), added: map[string]bool{}, packs: map[string]*packState{}}
	r.pool = newCompilePool(ctx, b.python, b.pyName, staging, compileProcs(jobs, math.MaxInt))
	if in.CacheTag == "" {
		r.initErr = refusal.New(refusal.MaterializeFailed, "the interpreter %s writes no bytecode (sys.implementation.cache_tag is None): create the env without bytecode", in.Path).WithRemedy(refusal.ActionNoBytecode, "")
		return r
	}
	magic, err := pycMagic(in)
	if err != nil {
		r.initErr = refusal.Wrap(refusal.MaterializeFailed, err, "cannot compile bytecode for %s", in.Path).WithRemedy(refusal.ActionNoBytecode, "")
		return r
	}
	b.magic, b.key = magic, pycCacheKey(in, id)
	if cacheDir != "" && pycRewriteVerified(in) {
		r.useCache = true
		b.cache = filepath.Join(cacheDir, hex.EncodeToString(b.key[:]))
	}
	return r
}

// prestart starts the compile processes at once when some wheel of ws
// has no pack in the cache (or there is no cache): the create will
// compile, and the processes' start-up then overlaps its first files
// instead of following the first batch. A warm create starts none. A
// wheel without a pack that turns out to install no source gets an empty
// one (closePacks), so that it does not start Python on every create.
func (r *bytecodeRun) prestart(ws []lockfile.ResolvedWheel) {
	if r.initErr != nil {
		return
	}
	start := !r.useCache
	for _, w := range ws {
		name := ""
		if fn, err := wheel.ParseFilename(w.Filename); err == nil {
			name = packName(fn.Name, fn.String()) // as the installer names it
		}
		if name == "" {
			start = true
		} else if _, err := os.Lstat(filepath.Join(r.b.cache, filepath.FromSlash(name))); err != nil && r.useCache {
			start = true
			r.missing = append(r.missing, name)
		}
	}
	if start {
		r.pool.start()
	}
}

// compileBytecode writes the bytecode of sources (site-packages .py files
// of the staging env) in one bytecodeRun; sources of no wheel share the
// pack "sources".
func compileBytecode(ctx context.Context, cacheDir string, in *Probe, id seal.InterpreterIdentity, staging, final string, l Layout, sources []pycSource, jobs int, record func(rel string, k seal.Known)) error {
	_, err := runBytecode(ctx, cacheDir, in, id, staging, final, l, sources, jobs, record)
	return err
}

// runBytecode is compileBytecode, returning the finished run.
func runBytecode(ctx context.Context, cacheDir string, in *Probe, id seal.InterpreterIdentity, staging, final string, l Layout, sources []pycSource, jobs int, record func(rel string, k seal.Known)) (*bytecodeRun, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	r := newBytecodeRun(ctx, cacheDir, filepath.Dir(staging), in, id, staging, final, l, jobs, record)
	r.pool.procs = compileProcs(jobs, len(sources))
	// Directory order: creating files directory by directory is faster on
	// ext4 than scattering them.
	sources = slices.Clone(sources)
	slices.SortFunc(sources, func(x, y pycSource) int { return strings.Compare(x.rel, y.rel) })
	for i := range sources {
		if sources[i].pack == "" {
			sources[i].pack = packName("sources", "sources")
		}
	}
	if err := r.add(sources); err != nil {
		r.abort()
		return nil, err
	}
	err := r.finish()
	r.wait()
	return r, err
}

// Outcomes of a cache lookup.
const (
	pycMiss   = iota // compile it
	pycDone          // installed from the cache (or known not to compile)
	pycDirect        // compile it with its final path
)

// add takes sources written into the staging env (from several
// goroutines): those in the cache are installed now, the rest queued on
// the compile processes. The error is a failure to write the env.
func (r *bytecodeRun) add(sources []pycSource) error {
	if len(sources) == 0 {
		return nil
	}
	if r.initErr != nil {
		return r.initErr
	}
	r.mu.Lock()
	for _, s := range sources {
		r.added[s.rel] = true
	}
	r.mu.Unlock()
	b := r.b
	if !r.useCache {
		r.pool.submit('d', b.staging, b.final, sources, r.written)
		return nil
	}
	out := make([]byte, len(sources))
	look := func(i int, bp *[]byte) error {
		var err error
		out[i], err = r.fromCache(sources[i], bp)
		return err
	}
	var err error
	if len(sources) < 16 {
		bp := readBufs.Get().(*[]byte)
		for i := range sources {
			if err = look(i, bp); err != nil {
				break
			}
		}
		readBufs.Put(bp)
	} else {
		err = inChunks(r.ctx, len(sources), r.jobs, func(i int) error {
			bp := readBufs.Get().(*[]byte)
			defer readBufs.Put(bp)
			return look(i, bp)
		})
	}
	if err != nil {
		return err
	}
	var misses, direct []pycSource
	for i, s := range sources {
		switch out[i] {
		case pycMiss:
			misses = append(misses, s)
		case pycDirect:
			direct = append(direct, s)
		}
	}
	if len(misses) > 0 {
		r.pool.submit('c', b.staging, b.final, misses, r.cached)
	}
	if len(direct) > 0 {
		r.pool.submit('d', b.staging, b.final, direct, r.written)
	}
	return nil
}

// pack returns the state of the pack name ("": none).
func (r *bytecodeRun) pack(name string) *packState {
	if name == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.packs[name]
	if ps == nil && !r.done {
		ps = &packState{name: name}
		r.packs[name] = ps
	}
	return ps
}

// lookup finds src's entry in the pack, or in the packs of the
// distribution's other versions.
func (r *bytecodeRun) lookup(ps *packState, src [32]byte) (*pycPack, packEntry, bool) {
	ps.ownOnce.Do(func() {
		if own, err := openPycPack(filepath.Join(r.b.cache, filepath.FromSlash(ps.name)), r.b.key); err == nil {
			ps.own = own
		}
	})
	if ps.own != nil {
		if e, ok := ps.own.index[src]; ok {
			return ps.own, e, true
		}
	}
	ps.sibOnce.Do(func() {
		p := filepath.Join(r.b.cache, filepath.FromSlash(ps.name))
		ps.sibs = siblingPacks(filepath.Dir(p), filepath.Base(p), r.b.key)
	})
	for _, sp := range ps.sibs {
		if e, ok := sp.index[src]; ok {
			return sp, e, true
		}
	}
	return nil, packEntry{}, false
}

// fromCache installs s from its pack entry when there is a usable one
// (pycDone), or says to compile it (pycMiss: no entry, or a damaged one,
// which the pack written at the end replaces) or to compile it with its
// final path (pycDirect). The error is a failure to write the env.
func (r *bytecodeRun) fromCache(s pycSource, bp *[]byte) (byte, error) {
	ps := r.pack(s.pack)
	if ps == nil {
		return pycMiss, nil
	}
	p, e, ok := r.lookup(ps, s.sum)
	if !ok {
		return pycMiss, nil
	}
	out := byte(pycDone)
	var pyc []byte
	switch e.kind {
	case pycKindDirect:
		out = pycDirect
	case pycKindPyc:
		var err error
		if pyc, err = p.read(e, bp); err != nil {
			return pycMiss, nil
		}
		err = r.b.install(s, pyc)
		switch {
		case errors.Is(err, errPycName):
			out = pycDirect
		case errors.Is(err, errPycShape):
			return pycMiss, nil // not this interpreter's: compiled again, replaced
		case err != nil:
			return 0, err
		}
	}
	if p != ps.own {
		// Another version's: this wheel gets a pack of its own.
		r.store(ps, s.sum, e.kind, pyc)
		return out, nil
	}
	ps.mu.Lock()
	ps.hits = append(ps.hits, packHit{p: p, src: s.sum, e: e})
	ps.mu.Unlock()
	return out, nil
}

// store adds the entry of source src to its wheel's new pack.
func (r *bytecodeRun) store(ps *packState, src [32]byte, kind byte, pyc []byte) {
	if ps == nil {
		return
	}
	ps.mu.Lock()
	if ps.w == nil && !ps.wErr {
		w, err := newPackWriter(r.b.tmpDir, r.b.key)
		ps.w, ps.wErr = w, err != nil
	}
	w := ps.w
	ps.mu.Unlock()
	if w != nil {
		w.add(src, kind, pyc)
	}
}

// taken reports whether add was given the source rel.
func (r *bytecodeRun) taken(rel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.added[rel]
}

// written handles direct-mode answers: each pyc compiled with its final
// path is written as it is.
func (r *bytecodeRun) written(src []pycSource, res []compiled) error {
	for i, c := range res {
		if c.kind == 'D' {
			if err := r.b.write(src[i].rel, c.pyc); err != nil {
				return err
			}
		}
	}
	return nil
}

// cached handles cache-mode answers: a placeholder pyc is retargeted,
// written and added to its wheel's pack (when it cannot take this
// source's final path, the source is compiled again with it); a source
// that does not compile, or that must be compiled with its final path, is
// remembered as such.
func (r *bytecodeRun) cached(src []pycSource, res []compiled) error {
	b := r.b
	var redo []pycSource
	var ps *packState
	for i, c := range res {
		s := src[i]
		if ps == nil || ps.name != s.pack {
			ps = r.pack(s.pack)
		}
		switch c.kind {
		case 'P':
			err := b.install(s, c.pyc)
			switch {
			case err == nil:
			case errors.Is(err, errPycName):
				redo = append(redo, s)
			case errors.Is(err, errPycShape):
				redo = append(redo, s)
				continue // not a pyc to keep
			default:
				return err
			}
			r.store(ps, s.sum, pycKindPyc, c.pyc)
		case 'D':
			if err := b.write(s.rel, c.pyc); err != nil {
				return err
			}
			r.store(ps, s.sum, pycKindDirect, nil)
		case 'N':
			r.store(ps, s.sum, pycKindNoSource, nil)
		}
	}
	if len(redo) > 0 {
		r.pool.submit('d', b.staging, b.final, redo, r.written)
	}
	return nil
}

// finish waits for every source added to be compiled and written, then
// writes the pycs that waited for the install to be over (claim), and
// starts writing the packs that gained entries, which the caller's sealing
// of the env overlaps (they are in the cache, not the env): wait (or
// abort) waits for them. Call it once the install is over. It records the
// compile processes' CPU time.
func (r *bytecodeRun) finish() error {
	cpu, err := r.pool.wait()
	r.cpu = cpu
	b := r.b
	b.claim = nil
	for _, d := range b.deferred {
		if err != nil {
			break
		}
		err = b.write(d.rel, d.pyc)
	}
	b.deferred = nil
	r.closeDirs()
	commit := err == nil
	r.packing.Go(func() { r.closePacks(commit) })
	return err
}

// wait waits for the packs finish started to be written.
func (r *bytecodeRun) wait() { r.packing.Wait() }

// abort stops the compile processes and waits for them, and for the packs
// finish started: nothing is written into the env or the cache after it
// returns. New packs not started are dropped.
func (r *bytecodeRun) abort() {
	r.pool.abort()
	r.closeDirs()
	r.packing.Wait()
	r.closePacks(false)
}

// closePacks commits the new packs (when commit is set; else drops them)
// and closes the packs read. A new pack gets the entries this create took
// from the wheel's old pack (read again and checked) as well as those it
// took from other versions' and compiled, so that it holds every source
// its wheel installed. Packs are committed on jobs goroutines.
func (r *bytecodeRun) closePacks(commit bool) {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	packs := make([]*packState, 0, len(r.packs))
	for _, ps := range r.packs {
		packs = append(packs, ps)
	}
	for _, name := range r.missing {
		if r.packs[name] == nil && commit {
			// A wheel without sources: an empty pack says so.
			if w, err := newPackWriter(r.b.tmpDir, r.b.key); err == nil {
				packs = append(packs, &packState{name: name, w: w})
			}
		}
	}
	r.mu.Unlock()
	_ = parallel(context.Background(), len(packs), r.jobs, func(i int) error {
		ps := packs[i]
		if ps.w != nil && commit {
			var buf []byte
			for _, h := range ps.hits {
				if ps.w.has(h.src) {
					continue
				}
				var pyc []byte
				if h.e.kind == pycKindPyc {
					var err error
					if pyc, err = h.p.read(h.e, &buf); err != nil {
						continue
					}
				}
				ps.w.add(h.src, h.e.kind, pyc)
			}
			_ = ps.w.commit(filepath.Join(r.b.cache, filepath.FromSlash(ps.name)), r.b.key)
		} else if ps.w != nil {
			ps.w.discard()
		}
		if ps.own != nil {
			ps.own.close()
		}
		for _, sp := range ps.sibs {
			sp.close()
		}
		return nil
	})
}

// closeDirs closes the __pycache__ descriptors (once nothing writes).
func (r *bytecodeRun) closeDirs() {
	r.b.dirs.Range(func(k, v any) bool {
		d := v.(*dirOnce)
		d.once.Do(func() { d.fd = -1 }) // none can be made after this
		if d.fd >= 0 {
			unix.Close(d.fd)
			d.fd = -1
		}
		return true
	})
}

// install writes s's pyc from a placeholder pyc: errPycName when pyc
// cannot take s's final path, errPycShape when it is not a placeholder
// pyc of this interpreter; any other error is a failure to write the env.
func (b *bytecode) install(s pycSource, pyc []byte) error {
	r, err := retargetPyc(pyc, b.magic, b.final+"/"+s.rel)
	if err != nil {
		return err
	}
	return b.writeParts(s.rel, r)
}

// write writes pyc, compiled with its final path, as rel's bytecode.
func (b *bytecode) write(rel string, pyc []byte) error {
	return b.writeParts(rel, retargeted{head: pyc})
}

// pycPath is where py_compile writes the bytecode of the source rel
// (importlib.util.cache_from_source, no optimization level).
func (b *bytecode) pycPath(rel string) string {
	dir, name := path.Split(rel)
	return dir + "__pycache__/" + name[:len(name)-len(".py")] + "." + b.tag + ".pyc"
}

// writeParts creates rel's pyc (mode 0444, as the installer writes files)
// with one writev and records its size and sha256. A pyc a wheel shipped
// at that path is replaced, as py_compile replaces it.
func (b *bytecode) writeParts(rel string, r retargeted) error {
	out := b.pycPath(rel)
	if b.claim != nil && !b.claim(out) {
		b.mu.Lock()
		b.deferred = append(b.deferred, deferredPyc{rel: rel, pyc: r.Bytes()})
		b.mu.Unlock()
		return nil
	}
	dir, name := path.Split(out)
	d, _ := b.dirs.LoadOrStore(dir, &dirOnce{fd: -1})
	do := d.(*dirOnce)
	do.once.Do(func() {
		p := filepath.Join(b.staging, filepath.FromSlash(dir))
		err := unix.Mkdir(p, 0o755)
		if err != nil && err != unix.EEXIST {
			do.err = refusal.Wrap(refusal.MaterializeFailed, &fs.PathError{Op: "mkdir", Path: p, Err: err}, "cannot create %s in the env; check the store's disk", dir)
			return
		}
		if b.dirFDs.Add(1) <= maxPycDirFDs {
			if fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
				do.fd = fd
			}
		}
	})
	if do.err != nil {
		return do.err
	}
	at, p := do.fd, name
	if at < 0 {
		at, p = unix.AT_FDCWD, filepath.Join(b.staging, filepath.FromSlash(out))
	}
	stamp, err := writeNew(at, p, r)
	if errors.Is(err, fs.ErrExist) {
		// A pyc a wheel shipped, once the install is over. The rename
		// changes the file's ctime: Freeze takes its stat.
		full := filepath.Join(b.staging, filepath.FromSlash(out))
		tmp := full + ".tmp-cruxprov"
		if _, err = writeNew(unix.AT_FDCWD, tmp, r); err == nil {
			err = os.Rename(tmp, full)
		}
		stamp = seal.Stamp{}
	}
	if err != nil {
		return refusal.Wrap(refusal.MaterializeFailed, err, "cannot write %s in the env; check the store's disk", out)
	}
	b.record(out, seal.Known{Size: int64(r.Len()), SHA256: r.Sum(), Stamp: stamp})
	return nil
}

// writeNew creates p (relative to the directory at), exclusively, mode
// 0444, writes r to it and returns its stamp for the seal.
func writeNew(at int, p string, r retargeted) (seal.Stamp, error) {
	fd, err := unix.Openat(at, p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o444)
	for err == unix.EINTR {
		fd, err = unix.Openat(at, p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o444)
	}
	if err != nil {
		return seal.Stamp{}, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	iov := [][]byte{r.head, r.name, r.tail}
	for len(iov) > 0 {
		if len(iov[0]) == 0 {
			iov = iov[1:]
			continue
		}
		n, err := unix.Writev(fd, iov)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = syscall.EIO
		}
		if err != nil {
			unix.Close(fd)
			return seal.Stamp{}, &fs.PathError{Op: "write", Path: p, Err: err}
		}
		for n > 0 {
			k := min(n, len(iov[0]))
			iov[0] = iov[0][k:]
			n -= k
			if len(iov[0]) == 0 {
				iov = iov[1:]
			}
		}
	}
	stamp, _ := seal.StampOf(fd) // none: Freeze takes a stat of its own
	if err := unix.Close(fd); err != nil {
		return seal.Stamp{}, &fs.PathError{Op: "close", Path: p, Err: err}
	}
	return stamp, nil
}

var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPycEntry bounds a pyc a compile process answers (CPython's largest
// stdlib pyc is well under 1 MiB).
const maxPycEntry = 256 << 20

// compiled is what the compile script answered for one source.
type compiled struct {
	kind byte // P, D, N or X
	pyc  []byte
}

// compile runs the env's interpreter over sources in mode ("cache" or
// "direct") on compileProcs(jobs) processes of a compilePool (-S -s: no
// site, so a wheel's .pth file does not run at install time;
// PYTHONHASHSEED=0: reproducible bytecode) and returns one answer per
// source, in order. The rels of sources must be distinct.
func (b *bytecode) compile(ctx context.Context, mode string, sources []pycSource, jobs int) ([]compiled, error) {
	at := make(map[string]int, len(sources))
	for i, s := range sources {
		at[s.rel] = i
	}
	res := make([]compiled, len(sources))
	pool := newCompilePool(ctx, b.python, b.pyName, b.staging, compileProcs(jobs, len(sources)))
	pool.submit(mode[0], b.staging, b.final, sources, func(src []pycSource, r []compiled) error {
		for i, s := range src {
			res[at[s.rel]] = compiled{kind: r[i].kind, pyc: bytes.Clone(r[i].pyc)}
		}
		return nil
	})
	if _, err := pool.wait(); err != nil {
		return nil, err
	}
	return res, nil
}

// compileProcs is how many compile processes to start for n sources and
// jobs: each is a CPU-bound Python, so more than the CPUs only costs
// memory and startup (--jobs 1000 would start 1000 interpreters), and
// never more than the sources.
func compileProcs(jobs, n int) int {
	return max(1, min(jobs, runtime.NumCPU(), n))
}

func lastLines(s string) string {
	b := []byte(s)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(bytes.ReplaceAll(b, []byte("\n"), []byte(" | ")))
}

// inChunks runs fn(0..n-1) on jobs workers, each taking contiguous runs
// of indexes (a few per worker, so that a slow run does not leave a core
// idle): sources sorted by path then land directory by directory, and two
// workers seldom create files in one directory at once, which contend for
// its lock (~20% slower when they interleave).
func inChunks(ctx context.Context, n, jobs int, fn func(i int) error) error {
	k := min(n, max(1, jobs)*8)
	if k == 0 {
		return nil
	}
	return parallel(ctx, k, jobs, func(c int) error {
		for i := c * n / k; i < (c+1)*n/k; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	})
}

package materialize

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/seal"
)

// pycWheel's sources: shared bytes (one cache entry), an empty module, a
// non-ASCII name, the placeholder in the source, one that does not
// compile, a nested package, and a stale pyc the wheel ships where the
// stage writes one.
func pycWheel(tag string) files {
	return files{
		"pycdemo/__init__.py":                     "",
		"pycdemo/mod.py":                          "def f():\n    return {'a', 'b'}\n",
		"pycdemo/same.py":                         "def f():\n    return {'a', 'b'}\n",
		"pycdemo/ünï.py":                          "def f():\n    return 'ünï'\n",
		"pycdemo/token.py":                        "P = '" + pycPlaceholder + "'\ndef f():\n    return P\n",
		"pycdemo/bad.py":                          "def broken(:\n",
		"pycdemo/deep/__init__.py":                "from . import x\n",
		"pycdemo/deep/x.py":                       "class C:\n    def m(self):\n        return lambda: 1\n",
		"pycdemo/__pycache__/mod." + tag + ".pyc": "stale bytecode the wheel shipped\n",
	}
}

// envPycs returns every pyc below env's site-packages: path → bytes.
func envPycs(t *testing.T, env string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(env, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".pyc") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = b
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPycs holds env's bytecode to py_compile's with the final path: one
// pyc per compiling source, the bytes the oracle writes, none for bad.py.
func checkPycs(t *testing.T, env, tag string) map[string][]byte {
	t.Helper()
	sp := filepath.Join(env, "lib", "python3.11", "site-packages")
	var pairs [][2]string
	var pycs []string
	for name := range pycWheel(tag) {
		if strings.HasSuffix(name, ".py") {
			src := filepath.Join(sp, name)
			pairs = append(pairs, [2]string{src, src})
			dir, base := filepath.Split(src)
			pycs = append(pycs, filepath.Join(dir, "__pycache__", strings.TrimSuffix(base, ".py")+"."+tag+".pyc"))
		}
	}
	want := pyCompile(t, realPython, pairs)
	got := envPycs(t, env)
	for i, p := range pycs {
		switch {
		case want[i] == nil && got[p] != nil:
			t.Errorf("%s: written, but py_compile does not compile its source", p)
		case want[i] != nil && !bytes.Equal(got[p], want[i]):
			t.Errorf("%s: %d bytes differ from py_compile's %d", p, len(got[p]), len(want[i]))
		}
	}
	n := 0
	for p := range got {
		if strings.Contains(p, "/pycdemo/") {
			n++
		}
	}
	if n != len(pycs)-1 {
		t.Errorf("%d pycs of pycdemo in the env, want %d", n, len(pycs)-1)
	}
	return got
}

type entryStat struct {
	ino          uint64
	mtime, ctime int64
}

// cachePacks returns the pyc cache's packs: path → stat.
func cachePacks(t *testing.T, home string) map[string]entryStat {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(home, PycCacheDir, "*", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entryStat{}
	for _, m := range ms {
		var st unix.Stat_t
		if err := unix.Stat(m, &st); err != nil {
			t.Fatal(err)
		}
		out[m] = entryStat{st.Ino, st.Mtim.Nano(), st.Ctim.Nano()}
	}
	return out
}

// packEntries reads every entry of the pack at p: source sha256 → kind
// and pyc.
func packEntries(t *testing.T, p string) (key [32]byte, _ map[[32]byte]packTestEntry) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < pycPackHeadLen {
		t.Fatalf("%s: %d bytes", p, len(b))
	}
	key = [32]byte(b[len(pycPackMagic):pycPackHeadLen])
	pk, err := openPycPack(p, key)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer pk.close()
	out := map[[32]byte]packTestEntry{}
	for src, e := range pk.index {
		var buf []byte
		pyc, err := pk.read(e, &buf)
		if err != nil {
			t.Fatalf("%s: entry %x: %v", p, src[:4], err)
		}
		out[src] = packTestEntry{e.kind, pyc}
	}
	return key, out
}

func removePycEnv(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{seal.SealPath(dir), seal.StatIndexPath(dir), dir} {
		if err := removeTree(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreateBytecodeCache: a cold create fills the pyc cache, a warm one
// installs from it without touching it, a damaged entry is compiled again
// and replaced; every time the env's bytecode is py_compile's with the
// final path, Python imports it as is (co_filename the final path, no pyc
// rewritten), and the seal's hashes of it hold under deep verify.
func TestCreateBytecodeCache(t *testing.T) {
	ctx := context.Background()
	_, in := host(t)
	st := newStore(t)
	w := putWheel(t, st, "pycdemo-1.0-py3-none-any.whl", wheeltest.Build(t, "pycdemo-1.0-py3-none-any.whl", pycWheel(in.CacheTag)))
	req := request(t, w)
	req.NoCompile = false
	create := func(what string) (string, map[string][]byte) {
		t.Helper()
		res, err := Create(ctx, st, req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Reused {
			t.Fatalf("%s: reused", what)
		}
		if _, err := seal.Verify(ctx, res.Dir, seal.Options{Deep: true}); err != nil {
			t.Fatalf("%s: deep verify: %v", what, err)
		}
		checkStats(t, res.Dir)
		return res.Dir, checkPycs(t, res.Dir, in.CacheTag)
	}

	env, cold := create("cold")
	packs := cachePacks(t, st.Home())
	if len(packs) != 1 {
		t.Fatalf("%d packs, want 1: %v", len(packs), packs)
	}
	pack := firstKey(packs)
	if want := filepath.Join(st.Home(), PycCacheDir, "*", "pycdemo", "pycdemo-1.0-py3-none-any.whl"+pycPackExt); !matches(want, pack) {
		t.Errorf("pack %s, want %s", pack, want)
	}
	// __init__ (empty), mod = same, ünï, token (to compile with its final
	// path), bad (does not compile), deep/__init__, deep/x.
	key, entries := packEntries(t, pack)
	kinds := map[byte]int{}
	for _, e := range entries {
		kinds[e.kind]++
	}
	if len(entries) != 7 || kinds[pycKindPyc] != 5 || kinds[pycKindDirect] != 1 || kinds[pycKindNoSource] != 1 {
		t.Fatalf("%d entries (%v), want 7: 5 P, 1 D, 1 N", len(entries), kinds)
	}

	// Python uses the pycs as they are, with the final path.
	sp := filepath.Join(env, "lib", "python3.11", "site-packages")
	out := runPython(t, env, "-c", "import pycdemo.mod as m, pycdemo.token, pycdemo.deep, importlib; u = importlib.import_module('pycdemo.ünï'); print(m.__file__, m.f.__code__.co_filename, u.f.__code__.co_filename)")
	if want := sp + "/pycdemo/mod.py " + sp + "/pycdemo/mod.py " + sp + "/pycdemo/ünï.py\n"; out != want {
		t.Errorf("import: %q, want %q", out, want)
	}
	verbose := runPython(t, env, "-v", "-c", "import pycdemo.mod, pycdemo.deep.x")
	for _, m := range []string{"pycdemo/__pycache__/mod", "pycdemo/deep/__pycache__/x"} {
		if p := "code object from '" + sp + "/" + m + "." + in.CacheTag + ".pyc'"; !strings.Contains(verbose, p) {
			t.Errorf("python -v does not load %s from its pyc:\n%s", m, verbose)
		}
	}
	if after := envPycs(t, env); len(after) != len(cold) {
		t.Errorf("importing changed the pycs: %d, then %d", len(cold), len(after))
	} else {
		for p, b := range cold {
			if !bytes.Equal(after[p], b) {
				t.Errorf("importing rewrote %s", p)
			}
		}
	}
	if _, err := seal.Verify(ctx, env, seal.Options{Deep: true}); err != nil {
		t.Fatalf("after imports: %v", err)
	}

	// Warm: the same bytes, the cache untouched.
	removePycEnv(t, env)
	_, warm := create("warm")
	for p, b := range cold {
		if !bytes.Equal(warm[p], b) {
			t.Errorf("warm %s differs from cold", p)
		}
	}
	if again := cachePacks(t, st.Home()); len(again) != 1 || again[pack] != packs[pack] {
		t.Errorf("warm create changed the cache: %v, then %v", packs, again)
	}

	// Damage: the pack truncated, garbage, a pyc flipped in place (its
	// entry fails its checksum), a valid pack whose pyc has another magic.
	// Each time the env is right and the pack is written again, whole.
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	var first [32]byte
	for src, e := range entries {
		if e.kind == pycKindPyc && (first == [32]byte{} || bytes.Compare(src[:], first[:]) < 0) {
			first = src
		}
	}
	otherMagic := map[[32]byte]packTestEntry{}
	for src, e := range entries {
		if src == first {
			bad := bytes.Clone(e.pyc)
			bad[0] ^= 0xff
			e.pyc = bad
		}
		otherMagic[src] = e
	}
	flipped := bytes.Clone(b)
	flipped[pycPackHeadLen+20] ^= 1
	for name, nb := range map[string][]byte{
		"truncated":   b[:len(b)/2],
		"garbage":     []byte("garbage"),
		"flipped pyc": flipped,
		"other magic": writePack(t, t.TempDir(), "p", key, otherMagic),
	} {
		if err := os.Remove(pack); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pack, nb, 0o444); err != nil {
			t.Fatal(err)
		}
		removePycEnv(t, env)
		_, repaired := create("after damage: " + name)
		for p, b := range cold {
			if !bytes.Equal(repaired[p], b) {
				t.Errorf("%s: %s differs", name, p)
			}
		}
		if _, again := packEntries(t, pack); len(again) != len(entries) {
			t.Errorf("%s: the pack was not written again whole: %d entries", name, len(again))
		} else {
			for src, e := range entries {
				if g := again[src]; g.kind != e.kind || !bytes.Equal(g.pyc, e.pyc) {
					t.Errorf("%s: entry %x differs", name, src[:4])
				}
			}
		}
	}
}

func matches(pattern, name string) bool {
	ok, _ := filepath.Match(pattern, name)
	return ok
}

func firstKey[V any](m map[string]V) string {
	for k := range m {
		return k
	}
	return ""
}

// TestCreateBytecodeNoCache: with NoCache every source is compiled with its
// final path, the same bytes, and no pyc cache is written.
func TestCreateBytecodeNoCache(t *testing.T) {
	_, in := host(t)
	st := newStore(t)
	w := putWheel(t, st, "pycdemo-1.0-py3-none-any.whl", wheeltest.Build(t, "pycdemo-1.0-py3-none-any.whl", pycWheel(in.CacheTag)))
	req := request(t, w)
	req.NoCompile, req.NoCache = false, true
	res, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	checkPycs(t, res.Dir, in.CacheTag)
	if _, err := seal.Verify(context.Background(), res.Dir, seal.Options{Deep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.Home(), PycCacheDir)); !os.IsNotExist(err) {
		t.Errorf("the pyc cache was written: %v", err)
	}
}

// TestCreateBytecodeCacheConcurrent: two creates of different envs that
// share a wheel fill one cold cache at once; both get py_compile's bytes
// and every entry is whole.
func TestCreateBytecodeCacheConcurrent(t *testing.T) {
	_, in := host(t)
	st := newStore(t)
	shared := putWheel(t, st, "pycdemo-1.0-py3-none-any.whl", wheeltest.Build(t, "pycdemo-1.0-py3-none-any.whl", pycWheel(in.CacheTag)))
	var reqs []Request
	for _, n := range []string{"one", "two"} {
		fn := n + "-1.0-py3-none-any.whl"
		w := putWheel(t, st, fn, wheeltest.Build(t, fn, files{n + "/__init__.py": "NAME = '" + n + "'\n"}))
		r := request(t, shared, w)
		r.NoCompile = false
		reqs = append(reqs, r)
	}
	res := make([]*Result, len(reqs))
	errs := make([]error, len(reqs))
	done := make(chan int)
	for i := range reqs {
		go func() {
			res[i], errs[i] = Create(context.Background(), st, reqs[i])
			done <- i
		}()
	}
	for range reqs {
		<-done
	}
	for i := range reqs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkPycs(t, res[i].Dir, in.CacheTag)
	}
	packs := cachePacks(t, st.Home())
	if len(packs) != 3 {
		t.Errorf("%d packs, want 3 (pycdemo, one, two): %v", len(packs), packs)
	}
	for p := range packs {
		if strings.Contains(filepath.Base(p), "pycs-") {
			t.Errorf("%s: a temporary pack", p)
		}
		packEntries(t, p)
	}
}

// TestCompileBytecodeFallbacks: a source whose placeholder pyc cannot be
// retargeted (it holds its own final path, which 3.13 would intern into
// one object with co_filename) is compiled with its final path, cold and
// warm, and gets py_compile's bytes.
func TestCompileBytecodeFallbacks(t *testing.T) {
	ctx := context.Background()
	in, l, id, root, cache := pycHost(t)
	final := "/srv/envs/final"
	srcs := map[string]string{
		"own.py":   "P = '" + final + "/" + l.SitePackages + "/own.py'\ndef f():\n    return P\n",
		"plain.py": "def f():\n    return 1\n",
	}
	for run := range 2 {
		staging := filepath.Join(root, "env", strconv.Itoa(run))
		sp := filepath.Join(staging, filepath.FromSlash(l.SitePackages))
		if err := os.MkdirAll(sp, 0o755); err != nil {
			t.Fatal(err)
		}
		py := filepath.Join(staging, filepath.FromSlash(l.Python))
		if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(in.Path, py); err != nil {
			t.Fatal(err)
		}
		var sources []pycSource
		var pairs [][2]string
		for name, s := range srcs {
			if err := os.WriteFile(filepath.Join(sp, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			rel := l.SitePackages + "/" + name
			sources = append(sources, pycSource{rel: rel, sum: sha256.Sum256([]byte(s)), size: int64(len(s))})
			pairs = append(pairs, [2]string{filepath.Join(sp, name), final + "/" + rel})
		}
		recorded := map[string][32]byte{}
		var mu sync.Mutex
		err := compileBytecode(ctx, cache, in, id, staging, final, l, sources, 2, func(rel string, k seal.Known) {
			mu.Lock()
			recorded[rel] = k.SHA256
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		want := pyCompile(t, realPython, pairs)
		for i, s := range sources {
			out := strings.TrimSuffix(path.Dir(s.rel)+"/__pycache__/"+path.Base(s.rel), ".py") + "." + in.CacheTag + ".pyc"
			got, err := os.ReadFile(filepath.Join(staging, filepath.FromSlash(out)))
			if err != nil || !bytes.Equal(got, want[i]) {
				t.Errorf("run %d: %s: %v, or not py_compile's bytes", run, out, err)
			}
			if recorded[out] != sha256.Sum256(want[i]) {
				t.Errorf("run %d: %s: recorded sha256 is not the bytes'", run, out)
			}
		}
	}
}

// TestCreateBytecodeWhileInstalling: bytecode is compiled while wheels are
// still being installed, so a pyc one wheel ships for another wheel's
// source may land before or after the stage writes it. Either way the env
// holds the stage's pyc (as py_compile replaces a stale one), its seal
// describes the tree (deep verify), and the shipping wheel's RECORD lists
// the pyc it shipped. Many sources, so that the stage writes pycs while
// the second wheel is still being installed.
func TestCreateBytecodeWhileInstalling(t *testing.T) {
	ctx := context.Background()
	_, in := host(t)
	a, b := files{}, files{}
	for i := range 200 {
		a[fmt.Sprintf("shared/m%03d.py", i)] = fmt.Sprintf("def f():\n    return %d\n", i)
		b[fmt.Sprintf("shared/__pycache__/m%03d.%s.pyc", i, in.CacheTag)] = "stale bytecode another wheel shipped\n"
		b[fmt.Sprintf("other/o%03d.py", i)] = fmt.Sprintf("X = %d\n", i)
	}
	for run := range 3 {
		st := newStore(t)
		wa := putWheel(t, st, "sharedsrc-1.0-py3-none-any.whl", wheeltest.Build(t, "sharedsrc-1.0-py3-none-any.whl", a))
		wb := putWheel(t, st, "sharedpyc-1.0-py3-none-any.whl", wheeltest.Build(t, "sharedpyc-1.0-py3-none-any.whl", b))
		req := request(t, wa, wb)
		req.NoCompile = false
		res, err := Create(ctx, st, req)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if _, err := seal.Verify(ctx, res.Dir, seal.Options{Deep: true}); err != nil {
			t.Fatalf("run %d: deep verify: %v", run, err)
		}
		sp := filepath.Join(res.Dir, "lib", "python3.11", "site-packages")
		var pairs [][2]string
		for i := range 200 {
			src := filepath.Join(sp, fmt.Sprintf("shared/m%03d.py", i))
			pairs = append(pairs, [2]string{src, src})
		}
		want := pyCompile(t, realPython, pairs)
		for i := range 200 {
			p := filepath.Join(sp, "shared", "__pycache__", fmt.Sprintf("m%03d.%s.pyc", i, in.CacheTag))
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want[i]) {
				t.Fatalf("run %d: %s: %v, or not py_compile's bytes", run, p, err)
			}
		}
		rec, err := os.ReadFile(filepath.Join(sp, "sharedpyc-1.0.dist-info", "RECORD"))
		if err != nil || !strings.Contains(string(rec), "shared/__pycache__/m000."+in.CacheTag+".pyc,sha256=") {
			t.Errorf("run %d: the shipping wheel's RECORD lacks its pyc (%v):\n%.400s", run, err, rec)
		}
	}
}

// stageSources writes srcs (name → source) into a new staging env under
// root (its python a link to in) and returns it and its sources, all of
// the pack named pack.
func stageSources(t *testing.T, root, name string, l Layout, in *Probe, srcs map[string]string, pack string) (string, []pycSource) {
	t.Helper()
	staging := filepath.Join(root, "env", name)
	sp := filepath.Join(staging, filepath.FromSlash(l.SitePackages))
	py := filepath.Join(staging, filepath.FromSlash(l.Python))
	for _, d := range []string{sp, filepath.Dir(py)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(in.Path, py); err != nil {
		t.Fatal(err)
	}
	var sources []pycSource
	for n, s := range srcs {
		if err := os.WriteFile(filepath.Join(sp, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, pycSource{rel: l.SitePackages + "/" + n, sum: sha256.Sum256([]byte(s)), size: int64(len(s)), pack: pack})
	}
	return staging, sources
}

// TestBytecodeCacheAcrossVersions: a wheel without a pack takes what it
// can from the packs of its distribution's other versions, so a new
// version compiles only the sources that changed, and its own pack holds
// them all; a warm run compiles nothing and leaves the pack alone.
func TestBytecodeCacheAcrossVersions(t *testing.T) {
	ctx := context.Background()
	in, l, id, root, cache := pycHost(t)
	v1 := map[string]string{"a.py": "def a():\n    return 1\n", "b.py": "def b():\n    return 2\n"}
	v2 := map[string]string{"a.py": v1["a.py"], "c.py": "def c():\n    return 3\n"}
	pack2 := packName("demo", "demo-2.0-py3-none-any.whl")
	for i, run := range []struct {
		srcs     map[string]string
		pack     string
		compiled int
	}{
		{v1, packName("demo", "demo-1.0-py3-none-any.whl"), 2},
		{v2, pack2, 1}, // a.py from 1.0's pack
		{v2, pack2, 0},
		// A wheel whose sources are all another version's gets a pack too.
		{v1, packName("demo", "demo-1.0-py3-none-manylinux1_x86_64.whl"), 0},
		{v1, packName("demo", "demo-1.0-py3-none-manylinux1_x86_64.whl"), 0},
	} {
		staging, sources := stageSources(t, root, strconv.Itoa(i), l, in, run.srcs, run.pack)
		r, err := runBytecode(ctx, cache, in, id, staging, "/srv/envs/final", l, sources, 2, func(string, seal.Known) {})
		if err != nil {
			t.Fatal(err)
		}
		if r.pool.sources != run.compiled {
			t.Errorf("run %d: %d sources compiled, want %d", i, r.pool.sources, run.compiled)
		}
		var pairs [][2]string
		var pycs []string
		for _, s := range sources {
			pairs = append(pairs, [2]string{filepath.Join(staging, filepath.FromSlash(s.rel)), "/srv/envs/final/" + s.rel})
			pycs = append(pycs, filepath.Join(staging, filepath.FromSlash(r.b.pycPath(s.rel))))
		}
		want := pyCompile(t, realPython, pairs)
		for k, p := range pycs {
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want[k]) {
				t.Errorf("run %d: %s: %v, or not py_compile's bytes", i, p, err)
			}
		}
	}
	dir := filepath.Join(cache, hex.EncodeToString(pycCacheKeyOf(t, in, id)))
	_, e2 := packEntries(t, filepath.Join(dir, filepath.FromSlash(pack2)))
	if len(e2) != 2 || e2[sha256.Sum256([]byte(v1["a.py"]))].kind != pycKindPyc || e2[sha256.Sum256([]byte(v2["c.py"]))].kind != pycKindPyc {
		t.Errorf("2.0's pack: %d entries, want a and c", len(e2))
	}
	if _, e3 := packEntries(t, filepath.Join(dir, filepath.FromSlash(packName("demo", "demo-1.0-py3-none-manylinux1_x86_64.whl")))); len(e3) != 2 {
		t.Errorf("the manylinux wheel's pack: %d entries, want a and b", len(e3))
	}
}

func pycCacheKeyOf(t *testing.T, in *Probe, id seal.InterpreterIdentity) []byte {
	t.Helper()
	k := pycCacheKey(in, id)
	return k[:]
}

// TestCreateBytecodeWarmStartsNoPython: a warm create starts no compile
// process, also when a wheel installs no source (it gets an empty pack).
func TestCreateBytecodeWarmStartsNoPython(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	src := putWheel(t, st, "withsrc-1.0-py3-none-any.whl", wheeltest.Build(t, "withsrc-1.0-py3-none-any.whl", files{"withsrc/__init__.py": "X = 1\n"}))
	data := putWheel(t, st, "nosrc-1.0-py3-none-any.whl", wheeltest.Build(t, "nosrc-1.0-py3-none-any.whl", files{"nosrc/data.txt": "data\n"}))
	req := request(t, src, data)
	req.NoCompile = false
	for i, want := range []string{"cold", "warm", "warm again"} {
		res, err := Create(ctx, st, req)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if cpu := res.Timings.CompileCPU; (i == 0) != (cpu > 0) {
			t.Errorf("%s: compile processes' CPU %v", want, cpu)
		}
		removePycEnv(t, res.Dir)
	}
	packs := cachePacks(t, st.Home())
	if len(packs) != 2 {
		t.Fatalf("%d packs, want 2: %v", len(packs), packs)
	}
	for p := range packs {
		if _, es := packEntries(t, p); strings.Contains(p, "nosrc") != (len(es) == 0) {
			t.Errorf("%s: %d entries", p, len(es))
		}
	}
}

// pycHost is what the bytecode cache tests start from: the host
// interpreter, its layout and identity, a temp root and the pyc cache
// directory of a home under it.
func pycHost(t *testing.T) (*Probe, Layout, seal.InterpreterIdentity, string, string) {
	t.Helper()
	p, in := host(t)
	l, err := LayoutFor(p)
	if err != nil {
		t.Fatal(err)
	}
	id, err := interpreterIdentity(in)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	return in, l, id, root, filepath.Join(root, "home", PycCacheDir)
}

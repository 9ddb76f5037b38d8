package materialize

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// oracleScript compiles each (file, dfile) pair on stdin with
// py_compile.compile itself (unchecked-hash) and answers as compileScript
// does: "D" and the pyc, or "N" for a source that does not compile.
// Before 3.11 it pins every str of the code while py_compile marshals it,
// as the stage does (pinStrings): py_compile's bytes there depend on what
// else the process holds, so only pinned bytes are comparable.
const oracleScript = pinStrings + `
import os, py_compile
import importlib._bootstrap_external as be
hashed = be._code_to_hash_pyc
def pinned(code, h, checked):
    keep = pin(code, [])
    return hashed(code, h, checked)
be._code_to_hash_pyc = pinned
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
tmp = os.path.join(sys.argv[1], "oracle.%d.pyc" % os.getpid())
out = sys.stdout.buffer
a = sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0")
for f, d in zip(a[0::2], a[1::2]):
    try:
        py_compile.compile(f, cfile=tmp, dfile=d, doraise=True, invalidation_mode=mode)
    except py_compile.PyCompileError:
        out.write(b"N" + bytes(4))
        continue
    with open(tmp, "rb") as g:
        b = g.read()
    os.remove(tmp)
    out.write(b"D" + len(b).to_bytes(4, "little") + b)
out.flush()
`

// pyCompilePlain is py_compile as it is, without pinning.
func pyCompilePlain(t testing.TB, py string, pairs [][2]string) [][]byte {
	t.Helper()
	return runFramed(t, py, plainOracleScript, pairs)
}

const plainOracleScript = `import os, py_compile, sys
mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
tmp = os.path.join(sys.argv[1], "plain.%d.pyc" % os.getpid())
out = sys.stdout.buffer
a = sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0")
for f, d in zip(a[0::2], a[1::2]):
    py_compile.compile(f, cfile=tmp, dfile=d, doraise=True, invalidation_mode=mode)
    with open(tmp, "rb") as g:
        b = g.read()
    out.write(b"D" + len(b).to_bytes(4, "little") + b)
out.flush()
`

// sameCodeScript reads pairs of pycs (framed as the oracle answers) and
// prints the first pair whose headers or loaded code differ: every
// attribute of every code object, constants by type and value.
const sameCodeScript = `import marshal, sys
def canon(o):
    if hasattr(o, "co_code"):
        return ("code",) + tuple(canon(getattr(o, a)) for a in sorted(dir(o)) if a.startswith("co_") and a not in ("co_lines", "co_positions", "co_lnotab"))
    if isinstance(o, (tuple, list)):
        return (type(o).__name__,) + tuple(canon(x) for x in o)
    if isinstance(o, frozenset):
        return ("frozenset",) + tuple(sorted(repr(canon(x)) for x in o))
    return (type(o).__name__, repr(o))
data = sys.stdin.buffer.read()
pycs = []
while data:
    n = int.from_bytes(data[1:5], "little")
    pycs.append(data[5:5+n])
    data = data[5+n:]
half = len(pycs) // 2
for i in range(half):
    a, b = pycs[i], pycs[half + i]
    if a[:16] != b[:16] or canon(marshal.loads(a[16:])) != canon(marshal.loads(b[16:])):
        print("pair %d" % i)
        break
`

// sameCode reports (as a non-empty string) the first of the pycs a and b,
// pairwise, that load as different code in py.
func sameCode(t testing.TB, py string, a, b [][]byte) string {
	t.Helper()
	var in bytes.Buffer
	for _, p := range append(append([][]byte{}, a...), b...) {
		in.WriteByte('D')
		in.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(p))))
		in.Write(p)
	}
	cmd := exec.Command(py, "-S", "-s", "-c", sameCodeScript)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	return strings.TrimSpace(string(out))
}

// pyCompile is the oracle: the pyc py_compile writes for each (source,
// dfile) pair, nil where the source does not compile, with py's -S -s and
// PYTHONHASHSEED=0 as the stage runs it.
func pyCompile(t testing.TB, py string, pairs [][2]string) [][]byte {
	t.Helper()
	return runFramed(t, py, oracleScript, pairs)
}

// runFramed runs script over pairs and splits its framed answers.
func runFramed(t testing.TB, py, script string, pairs [][2]string) [][]byte {
	t.Helper()
	var in bytes.Buffer
	for _, p := range pairs {
		in.WriteString(p[0] + "\x00" + p[1] + "\x00")
	}
	cmd := exec.Command(py, "-S", "-s", "-c", script, t.TempDir())
	cmd.Env = []string{"PYTHONHASHSEED=0", "LC_ALL=C.UTF-8"}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, stderr.Bytes())
	}
	res := make([][]byte, len(pairs))
	for i := range pairs {
		if len(out) < 5 {
			t.Fatalf("oracle answered %d of %d", i, len(pairs))
		}
		n := binary.LittleEndian.Uint32(out[1:5])
		if out[0] == 'D' {
			res[i] = out[5 : 5+n]
		}
		out = out[5+n:]
	}
	return res
}

// testPythons are the CPythons 3.8–3.13 here: pyenv's and Debian's.
func testPythons(t testing.TB) []string {
	var ps []string
	for _, v := range []string{"3.8", "3.9", "3.10", "3.11", "3.12", "3.13"} {
		m, _ := filepath.Glob("/root/.pyenv/versions/" + v + ".*/bin/python" + v)
		ps = append(ps, m...)
	}
	if _, err := os.Stat("/usr/bin/python3.11"); err == nil {
		ps = append(ps, "/usr/bin/python3.11")
	}
	if len(ps) == 0 {
		t.Skip("no CPython 3.8–3.13 here")
	}
	return ps
}

// edgeSources are sources that probe the rewrite's corners.
var edgeSources = map[string]string{
	"edge/consts.py": "# -*- coding: utf-8 -*-\n\"\"\"Docstring ñ.\"\"\"\nimport os\nS = {'a', 'b', 'c'}\nF = frozenset({1, 2, 3})\nT = ('x', b'y', 1.5, 2j, None, ...)\n" +
		"def f(x, *a, k=1, **kw):\n    '''doc'''\n    return [i for i in a if i in {'p', 'q'}]\n" +
		"class C:\n    def m(self):\n        return lambda y: (z for z in y)\n    async def n(self):\n        async with self as s:\n            pass\n" +
		"U = 'ünïcødé 环境 \\ud800'\nL = '" + strings.Repeat("long ", 80) + "'\n",
	"edge/ünï_模块.py":   "def f():\n    return __file__\nX = 'non-ASCII module name'\n",
	"edge/empty.py":    "",
	"edge/bad.py":      "def broken(:\n    pass\n",
	"edge/nul.py":      "x = 1\x00\n",
	"edge/token.py":    "P = '" + pycPlaceholder + "'\ndef f():\n    return P\n",
	"edge/comment.py":  "# " + pycPlaceholder + "\ndef f():\n    return 1\n",
	"edge/escaped.py":  "P = '\\x2f" + pycPlaceholder[1:] + "'\nB = b'\\x2f" + pycPlaceholder[1:] + "'\ndef f():\n    return P\n",
	"edge/folded.py":   "P = '/.cruxprov-pyc-' + 'placeholder-6f1c93e2ab5d/source.py'\n",
	"edge/ownpath.py":  "P = '/e/edge/ownpath.py'\ndef f():\n    return P\n",
	"edge/deep/a/b.py": "def outer():\n    def inner():\n        def innermost():\n            return 1\n        return innermost\n    return inner\n",
}

// writeSources writes the .py members of the wheel at whl and the edge
// sources below dir and returns their paths relative to dir.
func writeSources(t testing.TB, dir, whl string) []string {
	t.Helper()
	var rels []string
	put := func(rel string, b []byte) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	if zr, err := zip.OpenReader(whl); err == nil {
		for _, f := range zr.File {
			if !strings.HasSuffix(f.Name, ".py") {
				continue
			}
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			put("whl/"+f.Name, b)
		}
		zr.Close()
	}
	for rel, s := range edgeSources {
		put(rel, []byte(s))
	}
	return rels
}

// stdlibSample copies every third .py module of py's standard library
// (50 at most) below dir/std-<version> and returns their paths relative
// to dir.
func stdlibSample(t testing.TB, dir, py, xy string) []string {
	t.Helper()
	lib := filepath.Join(filepath.Dir(filepath.Dir(py)), "lib", "python"+xy)
	ms, _ := filepath.Glob(filepath.Join(lib, "*.py"))
	sort.Strings(ms)
	var rels []string
	for i := 0; i < len(ms) && len(rels) < 50; i += 3 {
		b, err := os.ReadFile(ms[i])
		if err != nil {
			t.Fatal(err)
		}
		rel := "std-" + xy + "/" + filepath.Base(ms[i])
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	return rels
}

// TestRetargetMatchesPyCompile is the core of the pyc cache: for every
// CPython 3.8–3.13 here and a few hundred real modules (pip's, a sample of
// the interpreter's standard library, edge cases), the placeholder pyc the
// stage compiles, retargeted in Go to a final path, is byte-identical to
// what py_compile writes when given that path directly: short ASCII, ASCII
// over 255 bytes, exactly 255 and 256 bytes, and non-ASCII paths.
func TestRetargetMatchesPyCompile(t *testing.T) {
	ctx := context.Background()
	whls, _ := filepath.Glob("/usr/share/python-wheels/pip-*.whl")
	if len(whls) == 0 {
		t.Skip("no pip wheel under /usr/share/python-wheels")
	}
	src := t.TempDir()
	var common []string // every other module of pip's, and the edge cases
	for i, r := range writeSources(t, src, whls[0]) {
		if i%2 == 0 || !strings.HasPrefix(r, "whl/") {
			common = append(common, r)
		}
	}
	finals := []string{"/e", "/" + strings.Repeat("long-", 60) + "env", "/tmp/ünïcødé-环境/envs/é"}
	for _, py := range testPythons(t) {
		t.Run(strings.TrimPrefix(strings.ReplaceAll(py, "/", "_"), "_"), func(t *testing.T) {
			in, err := ProbeInterpreter(ctx, py)
			if err != nil {
				t.Fatal(err)
			}
			if !pycRewriteVerified(in) {
				t.Errorf("%s %s: the rewrite is not enabled on it", in.Implementation, in.Version)
			}
			magic, err := pycMagic(in)
			if err != nil || in.CacheTag == "" {
				t.Fatalf("probe: magic %q (%v), cache tag %q", in.PycMagic, err, in.CacheTag)
			}
			rels := append(stdlibSample(t, src, py, in.Markers["python_version"]), common...)
			var sources []pycSource
			for _, r := range rels {
				sources = append(sources, pycSource{rel: r, size: 1})
			}
			b := &bytecode{staging: src, final: finals[0], python: py, pyName: py, tag: in.CacheTag, magic: magic}
			got, err := b.compile(ctx, "cache", sources, 2)
			if err != nil {
				t.Fatal(err)
			}
			// The oracle's pairs: every source at one of the finals, the
			// first 60 at each, the first 20 at exactly 255 and 256 bytes.
			type want struct {
				i     int
				final string
			}
			var pairs [][2]string
			var wants []want
			for i, r := range rels {
				fs := finals[i%len(finals) : i%len(finals)+1]
				if i < 60 || strings.HasPrefix(r, "edge/") {
					fs = finals
				}
				if i < 20 {
					for _, n := range []int{255, 256} {
						fs = append(fs[:len(fs):len(fs)], "/"+strings.Repeat("x", n-2-len(r)))
					}
				}
				for _, f := range fs {
					pairs = append(pairs, [2]string{filepath.Join(src, r), f + "/" + r})
					wants = append(wants, want{i, f})
				}
			}
			oracle := pyCompile(t, py, pairs)
			compared := 0
			for k, w := range wants {
				g, o, rel := got[w.i], oracle[k], rels[w.i]
				dfile := w.final + "/" + rel
				switch g.kind {
				case 'N', 'X':
					if o != nil {
						t.Errorf("%s: the stage skipped it (%c), py_compile compiled it", rel, g.kind)
					}
					continue
				case 'D':
					if strings.HasPrefix(rel, "whl/") || strings.HasPrefix(rel, "std-") {
						t.Errorf("%s: compiled directly, not through the cache", rel)
					}
					if w.final == finals[0] && !bytes.Equal(g.pyc, o) {
						t.Errorf("%s: the direct compile differs from py_compile's", rel)
					}
					continue
				}
				if o == nil {
					t.Errorf("%s: py_compile did not compile it, the stage did", rel)
					continue
				}
				r, err := retargetPyc(g.pyc, magic, dfile)
				if rel == "edge/ownpath.py" && w.final == "/e" {
					if err == nil {
						t.Errorf("%s: retargeted to a path a constant equals", rel)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s → %s: %v", rel, dfile, err)
					continue
				}
				if out := r.Bytes(); !bytes.Equal(out, o) {
					t.Errorf("%s → %q (%d bytes): retargeted pyc differs from py_compile's at byte %d", rel, dfile, len(dfile), firstDiff(out, o))
				} else if r.Sum() != sha256Of(o) || r.Len() != len(o) {
					t.Errorf("%s: Sum or Len wrong", rel)
				}
				compared++
			}
			for rel, kind := range map[string]byte{"edge/bad.py": 'N', "edge/token.py": 'D', "edge/escaped.py": 'D', "edge/folded.py": 'D', "edge/comment.py": 'D', "edge/consts.py": 'P', "edge/empty.py": 'P'} {
				for i, r := range rels {
					if r == rel && got[i].kind != kind {
						t.Errorf("%s: answered %c, want %c", rel, got[i].kind, kind)
					}
				}
			}
			if compared < 400 {
				t.Errorf("only %d pycs compared", compared)
			}
			if v := in.Markers["python_version"]; v == "3.8" || v == "3.9" || v == "3.10" {
				// Pinning changes marshal's flags only: the code Python
				// loads is plain py_compile's.
				var ps [][2]string
				var idx []int
				for i, r := range rels {
					if got[i].kind == 'P' && len(idx) < 250 {
						ps = append(ps, [2]string{filepath.Join(src, r), finals[2] + "/" + r})
						idx = append(idx, i)
					}
				}
				plain := pyCompilePlain(t, py, ps)
				var ours [][]byte
				for _, i := range idx {
					rt, err := retargetPyc(got[i].pyc, magic, finals[2]+"/"+rels[i])
					if err != nil {
						t.Fatal(err)
					}
					ours = append(ours, rt.Bytes())
				}
				if diff := sameCode(t, py, ours, plain); diff != "" {
					t.Errorf("pinned and plain pycs load as different code: %s", diff)
				}
			}
			t.Logf("%s (%s): %d sources, %d retargeted pycs identical to py_compile's", py, in.Version, len(rels), compared)
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func sha256Of(b []byte) [32]byte { return sha256.Sum256(b) }

// TestPycRewriteVerified: the pyc retargeting is used only for the
// CPython versions its byte-for-byte test against py_compile covers.
func TestPycRewriteVerified(t *testing.T) {
	for _, c := range []struct {
		impl, ver string
		ft, want  bool
	}{
		{"cpython", "3.11", false, true},
		{"cpython", "3.8", false, true},
		{"cpython", "3.13", true, false},
		{"cpython", "3.14", false, false},
		{"cpython", "3.7", false, false},
		{"pypy", "3.10", false, false},
	} {
		t.Run(fmt.Sprintf("%s %s free-threaded=%v", c.impl, c.ver, c.ft), func(t *testing.T) {
			in := &Probe{Implementation: c.impl, GILDisabled: c.ft, Markers: map[string]string{"python_version": c.ver}}
			if got := pycRewriteVerified(in); got != c.want {
				t.Errorf("%v, want %v", got, c.want)
			}
		})
	}
}

// TestMarshalStr pins the encodings CPython's marshal (version 4) chooses.
func TestMarshalStr(t *testing.T) {
	for _, c := range []struct {
		s             string
		interned, ref bool
		want          string
	}{
		{"ab", false, false, "z\x02ab"},
		{"ab", true, true, "\xda\x02ab"},
		{strings.Repeat("a", 255), false, true, "\xfa\xff" + strings.Repeat("a", 255)},
		{strings.Repeat("a", 256), false, true, "\xe1\x00\x01\x00\x00" + strings.Repeat("a", 256)},
		{strings.Repeat("a", 256), true, false, "A\x00\x01\x00\x00" + strings.Repeat("a", 256)},
		{"é", false, false, "u\x02\x00\x00\x00é"},
		{"é", true, true, "\xf4\x02\x00\x00\x00é"},
		{"", false, true, "\xfa\x00"},
	} {
		t.Run(fmt.Sprintf("%.10q interned=%v ref=%v", c.s, c.interned, c.ref), func(t *testing.T) {
			if got := string(marshalStr(c.s, c.interned, c.ref)); got != c.want {
				t.Errorf("marshalStr(%.10q, %v, %v) = %.20q, want %.20q", c.s, c.interned, c.ref, got, c.want)
			}
		})
	}
}

// seedPyc is a minimal pyc shaped as CPython writes one: a header, a code
// object whose file name is the placeholder, a reference back to it.
func seedPyc(magic string, nameType byte) []byte {
	b := []byte(magic)
	b = append(b, 1, 0, 0, 0)
	b = append(b, "12345678"...)
	b = append(b, 0xe3, 0, 0, 0, 0)
	b = append(b, nameType, byte(len(pycPlaceholder)))
	b = append(b, pycPlaceholder...)
	b = append(b, 'r', 0, 0, 0, 0, 'N')
	return b
}

// TestRetargetPycRefuses: every shape the retargeting does not know is
// errPycShape (then the source is compiled with its final path instead).
func TestRetargetPycRefuses(t *testing.T) {
	magic := []byte("\xa7\r\r\n")
	ok := seedPyc(string(magic), 0xfa)
	if r, err := retargetPyc(ok, magic, "/e/m.py"); err != nil || !bytes.Contains(r.Bytes(), []byte("\xfa\x07/e/m.py")) {
		t.Fatalf("the seed does not retarget: %v", err)
	}
	twice := append(bytes.Clone(ok), ok[16:]...)
	timestamp := bytes.Clone(ok)
	timestamp[4] = 0
	checked := bytes.Clone(ok)
	checked[4] = 3
	long := bytes.Clone(ok)
	long[16+5] = 'a' | 0x80
	for name, c := range map[string]struct {
		pyc      []byte
		filename string
	}{
		"wrong magic":        {seedPyc("\xa8\r\r\n", 0xfa), "/e/m.py"},
		"timestamp pyc":      {timestamp, "/e/m.py"},
		"checked hash pyc":   {checked, "/e/m.py"},
		"short":              {ok[:15], "/e/m.py"},
		"two placeholders":   {twice, "/e/m.py"},
		"no placeholder":     {ok[:20], "/e/m.py"},
		"not a short string": {long, "/e/m.py"},
		"unicode type":       {seedPyc(string(magic), 'u'), "/e/m.py"},
		"filename not UTF-8": {ok, "/e/\xff.py"},
		"filename in pyc":    {append(bytes.Clone(ok), "/e/m.py"...), "/e/m.py"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := retargetPyc(c.pyc, magic, c.filename); !errors.Is(err, errPycShape) {
				t.Errorf("%v, want errPycShape", err)
			}
		})
	}
}

// FuzzRetargetPyc: never panics, and what it accepts is the input with
// exactly the placeholder's string object replaced by filename's.
func FuzzRetargetPyc(f *testing.F) {
	magic := "\xa7\r\r\n"
	f.Add(seedPyc(magic, 0xfa), "/e/m.py")
	f.Add(seedPyc(magic, 'Z'), "/tmp/ünï/m.py")
	f.Add(seedPyc(magic, 0xda), "/"+strings.Repeat("x", 300))
	f.Add([]byte(magic+"\x01\x00\x00\x00"), "")
	f.Fuzz(func(t *testing.T, pyc []byte, filename string) {
		r, err := retargetPyc(pyc, []byte(magic), filename)
		if err != nil {
			if !errors.Is(err, errPycShape) {
				t.Fatalf("error %v", err)
			}
			return
		}
		out := r.Bytes()
		if len(out) != len(pyc)-2-len(pycPlaceholder)+len(r.name) || !bytes.HasPrefix(pyc, r.head) || !bytes.HasSuffix(pyc, r.tail) {
			t.Fatalf("not a one-object rewrite")
		}
		if !bytes.HasSuffix(r.name, []byte(filename)) || bytes.Contains(out, []byte(pycPlaceholder)) {
			t.Fatalf("name object %q", r.name)
		}
	})
}

// historySources: compiled one after the other in one process, b.py's
// bytes depended on a.py's code object still being alive (marshal sets
// FLAG_REF on an object by its reference count, and b.py's frozenset
// constant, shared by two functions, lost it): the cache mode kept the
// previous source's code until the next answer, so a create filling the
// pyc cache and one with --no-cache wrote different pycs, and `env create
// --replace --no-cache` changed an approved env's seal content digest.
var historySources = map[string]string{
	"hist/a.py": "_fixed = [F('PLUSPLUS', '++'), F('MINUSMINUS', '--')]\n",
	"hist/b.py": "def u(self):\n    if self.t in {'PLUSPLUS', 'MINUSMINUS'}:\n        return 1\n" +
		"def p(self):\n    if self.t in {'PLUSPLUS', 'MINUSMINUS'}:\n        return 2\n",
}

// TestPycIndependentOfWhatCameBefore: b.py's pyc is the same whether the
// stage compiles it through the cache after a.py, directly after a.py,
// or alone. CPython 3.12 keeps state across compiles in a process that
// changes b.py's bytes even once a.py's code is gone: there the stage
// compiles each source in a child forked from a process that compiles
// nothing (docs/seal.md), and this test holds it to the same bytes.
func TestPycIndependentOfWhatCameBefore(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	for rel, text := range historySources {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const final = "/envs/e"
	for _, py := range testPythons(t) {
		t.Run(strings.TrimPrefix(strings.ReplaceAll(py, "/", "_"), "_"), func(t *testing.T) {
			in, err := ProbeInterpreter(ctx, py)
			if err != nil {
				t.Fatal(err)
			}
			magic, err := pycMagic(in)
			if err != nil {
				t.Fatal(err)
			}
			b := &bytecode{staging: src, final: final, python: py, pyName: py, tag: in.CacheTag, magic: magic}
			bOf := func(mode string, rels ...string) []byte {
				var sources []pycSource
				for _, r := range rels {
					sources = append(sources, pycSource{rel: r, size: 1})
				}
				got, err := b.compile(ctx, mode, sources, 1)
				if err != nil {
					t.Fatal(err)
				}
				g := got[len(got)-1]
				switch g.kind {
				case 'D':
					return g.pyc
				case 'P':
					r, err := retargetPyc(g.pyc, magic, final+"/hist/b.py")
					if err != nil {
						t.Fatal(err)
					}
					return r.Bytes()
				}
				t.Fatalf("%s: answered %c", mode, g.kind)
				return nil
			}
			alone := bOf("direct", "hist/b.py")
			for _, c := range []struct {
				what string
				pyc  []byte
			}{
				{"through the cache after a.py", bOf("cache", "hist/a.py", "hist/b.py")},
				{"through the cache alone", bOf("cache", "hist/b.py")},
				{"directly after a.py", bOf("direct", "hist/a.py", "hist/b.py")},
			} {
				if !bytes.Equal(c.pyc, alone) {
					t.Errorf("%s: b.py %s differs from b.py alone at byte %d", in.Version, c.what, firstDiff(c.pyc, alone))
				}
			}
		})
	}
}

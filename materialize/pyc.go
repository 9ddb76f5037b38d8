package materialize

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/seal"
)

// Bytecode is compiled once per (interpreter, source) and kept in the
// store's pyc cache; installing it into an env only rewrites the file name
// it records (co_filename). The bytes of a pyc depend on where it is
// installed through that one name only: every code object of a module
// shares one string object for it, which marshal writes in full once and
// as back-references (TYPE_REF, which count objects, not bytes) after.
// So a source is compiled with dfile = pycPlaceholder, and retargetPyc
// replaces that string object's bytes with the final path, re-encoded as
// CPython's marshal would have written it. The result is byte-identical to
// compiling with the final path directly (TestRetargetMatchesPyCompile
// holds this for every CPython 3.8–3.13 here).

// pycPlaceholder is the file name cached bytecode is compiled with. It
// has no border (no proper prefix that is also a suffix), so its
// occurrences in a byte string never overlap and bytes.Count counts them
// all. Short ASCII: CPython writes it as TYPE_SHORT_ASCII(_INTERNED).
const pycPlaceholder = "/.cruxprov-pyc-placeholder-6f1c93e2ab5d/source.py"

// The marshal type codes of str objects (CPython Python/marshal.c, the
// same in 3.4–3.13) and the flag marking an object that later TYPE_REFs
// name.
const (
	marshalFlagRef            = 0x80
	marshalUnicode            = 'u'
	marshalInterned           = 't'
	marshalASCII              = 'a'
	marshalASCIIInterned      = 'A'
	marshalShortASCII         = 'z'
	marshalShortASCIIInterned = 'Z'
)

// pycHeaderLen is the size of a pyc's header (PEP 552): magic, flags, and
// the source hash or mtime and size.
const pycHeaderLen = 16

// pycUncheckedHash is the flags word of a hash-based pyc whose source is
// not checked on import.
const pycUncheckedHash = 0b01

// errPycShape is why retargetPyc refuses a pyc it does not recognize.
var errPycShape = errors.New("not an unchecked-hash pyc with exactly one placeholder file name")

// errPycName is why retargetPyc refuses a file name a placeholder pyc
// cannot take (not UTF-8, or already in the pyc): that source is
// compiled with its final path, while the pyc stays good for others.
var errPycName = fmt.Errorf("%w: the file name cannot replace the placeholder", errPycShape)

// retargeted is a pyc whose file name was rewritten, in three parts: the
// bytes before the file name object, the new object, the bytes after (so
// that it can be written with one writev, without a copy).
type retargeted struct {
	head, name, tail []byte
}

// Bytes returns the pyc as one slice.
func (r retargeted) Bytes() []byte {
	b := make([]byte, 0, r.Len())
	b = append(b, r.head...)
	b = append(b, r.name...)
	return append(b, r.tail...)
}

// Len is the pyc's size.
func (r retargeted) Len() int { return len(r.head) + len(r.name) + len(r.tail) }

// Sum is the pyc's sha256.
func (r retargeted) Sum() [32]byte {
	h := sha256.New()
	h.Write(r.head)
	h.Write(r.name)
	h.Write(r.tail)
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// retargetPyc returns pyc (compiled with dfile = pycPlaceholder) with its
// file name object replaced by filename, encoded as CPython's marshal
// writes a str: TYPE_SHORT_ASCII for ASCII of at most 255 bytes (one
// length byte), TYPE_ASCII for longer ASCII and TYPE_UNICODE for anything
// else (UTF-8, four length bytes, little-endian), each as its _INTERNED
// variant when the placeholder was interned (3.13 interns file names), and
// with the placeholder's FLAG_REF bit. It refuses (errPycShape) anything
// else: another magic, a pyc that is not unchecked-hash, a placeholder
// that occurs other than exactly once as a whole short-ASCII string
// object; and (errPycName, which wraps it) a filename that is not UTF-8
// or that occurs in pyc already (3.13 would share one interned object
// between it and an equal constant). The result shares memory with pyc.
func retargetPyc(pyc, magic []byte, filename string) (retargeted, error) {
	if len(magic) != 4 || len(pyc) < pycHeaderLen || !bytes.Equal(pyc[:4], magic) ||
		binary.LittleEndian.Uint32(pyc[4:8]) != pycUncheckedHash {
		return retargeted{}, errPycShape
	}
	ph := pycPlaceholder
	// Exactly one occurrence, after the header and its type and length
	// bytes: the first, with none after it (they never overlap).
	i := bytes.Index(pyc, []byte(ph))
	if i < pycHeaderLen+2 || bytes.Contains(pyc[i+len(ph):], []byte(ph)) {
		return retargeted{}, errPycShape
	}
	t, n := pyc[i-2], pyc[i-1]
	if int(n) != len(ph) {
		return retargeted{}, errPycShape
	}
	var interned bool
	switch t &^ marshalFlagRef {
	case marshalShortASCII:
	case marshalShortASCIIInterned:
		interned = true
	default:
		return retargeted{}, errPycShape
	}
	if !utf8.ValidString(filename) || len(filename) > 1<<30 || filename == pycPlaceholder || bytes.Contains(pyc, []byte(filename)) {
		return retargeted{}, errPycName
	}
	return retargeted{head: pyc[:i-2], name: marshalStr(filename, interned, t&marshalFlagRef != 0), tail: pyc[i+len(ph):]}, nil
}

// marshalStr encodes s (UTF-8) as marshal version 4 writes a str object.
func marshalStr(s string, interned, ref bool) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	var t byte
	var b []byte
	switch {
	case ascii && len(s) < 256:
		t = pick(interned, marshalShortASCIIInterned, marshalShortASCII)
		b = append(make([]byte, 0, 2+len(s)), 0, byte(len(s)))
	case ascii:
		t = pick(interned, marshalASCIIInterned, marshalASCII)
		b = binary.LittleEndian.AppendUint32(append(make([]byte, 0, 5+len(s)), 0), uint32(len(s)))
	default:
		t = pick(interned, marshalInterned, marshalUnicode)
		b = binary.LittleEndian.AppendUint32(append(make([]byte, 0, 5+len(s)), 0), uint32(len(s)))
	}
	if ref {
		t |= marshalFlagRef
	}
	b[0] = t
	return append(b, s...)
}

func pick(c bool, a, b byte) byte {
	if c {
		return a
	}
	return b
}

// pycCacheFormat names the cache's layout and pack format (pycpack.go);
// a change of either makes a new key, so old packs are never read.
const pycCacheFormat = "cruxprov-pyc-cache/2"

// pycCacheKey is what a cached pyc's bytes depend on besides the source:
// the cache format, the interpreter (real path, full version,
// implementation, the sha256 and size of its executable and libpython),
// the pyc magic and cache tag, the optimization level (0: no -O), the
// invalidation mode (unchecked-hash), the hash seed (0) and the
// placeholder. Written down exactly, one "name=value" line each:
//
//	sha256("cruxprov-pyc-cache/2\npath=…\nversion=…\nimplementation=…\nexe=<sha256 hex> <size>\nlib=<sha256 hex> <size> or -\nmagic=<hex>\ncache_tag=…\noptimize=0\ninvalidation=unchecked-hash\nhashseed=0\nplaceholder=…\n")
func pycCacheKey(in *Probe, id seal.InterpreterIdentity) [32]byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\npath=%s\nversion=%s\nimplementation=%s\n", pycCacheFormat, in.Path, in.Version, in.Implementation)
	fmt.Fprintf(&b, "exe=%s %d\n", id.SHA256.Hex(), id.Size)
	if id.LibPython != nil {
		fmt.Fprintf(&b, "lib=%s %d\n", id.LibPython.SHA256.Hex(), id.LibPython.Size)
	} else {
		b.WriteString("lib=-\n")
	}
	fmt.Fprintf(&b, "magic=%s\ncache_tag=%s\noptimize=0\ninvalidation=unchecked-hash\nhashseed=0\nplaceholder=%s\n", in.PycMagic, in.CacheTag, pycPlaceholder)
	return sha256.Sum256([]byte(b.String()))
}

// pycMagic decodes the interpreter's pyc magic (hex of 4 bytes).
func pycMagic(in *Probe) ([]byte, error) {
	m, err := hex.DecodeString(in.PycMagic)
	if err != nil || len(m) != 4 || m[2] != '\r' || m[3] != '\n' {
		return nil, fmt.Errorf("the interpreter reported pyc magic %q", in.PycMagic)
	}
	return m, nil
}

// pycRewriteVerified reports whether the rewrite is known to give
// py_compile's bytes on in: a CPython (with the GIL) of a version
// TestRetargetMatchesPyCompile covers. Others (a newer CPython whose
// marshal may differ, PyPy, a free-threaded build) have every source
// compiled with its final path: slower, always right. Add a version here
// once the differential test passes on it.
func pycRewriteVerified(in *Probe) bool {
	if in.Implementation != "cpython" || in.GILDisabled {
		return false
	}
	switch in.Markers["python_version"] {
	case "3.8", "3.9", "3.10", "3.11", "3.12", "3.13":
		return true
	}
	return false
}

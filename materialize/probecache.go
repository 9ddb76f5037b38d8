package materialize

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/seal"
)

// ProbeCache remembers interpreter probes (ProbeInterpreter and
// platform.Host) in a directory, so that creating or reusing an env does
// not start Python twice every time. An entry is keyed by the real path
// of an ELF executable and used only while the executable's and its
// libpython's stat (device, inode, size, mtime, ctime) are unchanged; a
// script (a pyenv shim, whose target depends on the caller's
// environment) is never cached. The zero value (no Dir) caches nothing.
type ProbeCache struct {
	Dir string
}

type statKey struct {
	Dev, Ino      uint64
	Size          int64
	MtimeNS, CtNS int64
	Path          string
}

// probeCacheFormat is bumped whenever the probe reports something new, so
// that entries written by an older cruxprov are probed again rather than
// read with the new fields empty.
const probeCacheFormat = 3

type cacheEntry struct {
	Format   int             `json:"format"`
	Exe      statKey         `json:"exe"`
	Lib      *statKey        `json:"lib,omitempty"`
	Interp   *Probe          `json:"interpreter"`
	Platform json.RawMessage `json:"platform,omitempty"`
	// Identity is the seal's identity of the interpreter (its sha256 and
	// its libpython's), valid while Exe and Lib are what it was taken at.
	Identity *seal.InterpreterIdentity `json:"identity,omitempty"`
}

func keyOf(path string) (statKey, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return statKey{}, false
	}
	return statKey{Dev: st.Dev, Ino: st.Ino, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtNS: st.Ctim.Nano(), Path: path}, true
}

// resolve returns the real path of python when it is an ELF executable.
func resolve(python string) (string, bool) {
	p := python
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", false
		}
		p = lp
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return "", false
	}
	f, err := os.OpenFile(real, os.O_RDONLY|unix.O_NONBLOCK, 0) // a FIFO must not hang the probe
	if err != nil {
		return "", false
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte("\x7fELF")) {
		return "", false
	}
	return real, true
}

func (c ProbeCache) path(real string) string {
	h := sha256.Sum256([]byte(real))
	return filepath.Join(c.Dir, hex.EncodeToString(h[:16])+".json")
}

func (c ProbeCache) load(python string) (*cacheEntry, string, bool) {
	if c.Dir == "" {
		return nil, "", false
	}
	real, ok := resolve(python)
	if !ok {
		return nil, "", false
	}
	b, err := capped.ReadFile(c.path(real), 1<<20)
	if err != nil {
		return nil, real, false
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil || e.Format != probeCacheFormat || e.Interp == nil || e.Interp.Path != real {
		return nil, real, false
	}
	if k, ok := keyOf(real); !ok || k != e.Exe {
		return nil, real, false
	}
	if e.Lib != nil {
		if k, ok := keyOf(e.Lib.Path); !ok || k != *e.Lib {
			return nil, real, false
		}
	}
	return &e, real, true
}

func (c ProbeCache) store(e *cacheEntry) {
	b, err := json.Marshal(e)
	if err != nil || os.MkdirAll(c.Dir, 0o755) != nil {
		return
	}
	p := c.path(e.Interp.Path)
	// A fresh temp file per writer: concurrent creates never share one.
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil && cerr == nil {
		_ = os.Rename(f.Name(), p)
	}
	os.Remove(f.Name())
}

// Interpreter is ProbeInterpreter through the cache.
func (c ProbeCache) Interpreter(ctx context.Context, python string) (*Probe, error) {
	e, real, ok := c.load(python)
	if ok {
		e.Interp.cache = c
		return e.Interp, nil
	}
	before, _ := keyOf(real)
	in, err := ProbeInterpreter(ctx, python)
	if err != nil {
		return nil, err
	}
	if after, ok := keyOf(real); ok && after == before {
		c.save(in, nil) // not when it changed while it was probed
	}
	in.cache = c
	return in, nil
}

// Host is platform.Host for the probed interpreter in, through the cache.
func (c ProbeCache) Host(ctx context.Context, in *Probe) (*platform.Platform, error) {
	if e, _, ok := c.load(in.Path); ok && len(e.Platform) > 0 {
		if p, err := platform.ParseJSON(e.Platform); err == nil {
			return p, nil
		}
	}
	p, err := platform.Host(ctx, in.Path)
	if err != nil {
		return nil, err
	}
	c.save(in, p)
	return p, nil
}

func (c ProbeCache) save(in *Probe, p *platform.Platform) {
	if c.Dir == "" {
		return
	}
	real, ok := resolve(in.Path)
	if !ok || real != in.Path {
		return
	}
	e := &cacheEntry{Interp: in}
	if old, _, ok := c.load(in.Path); ok {
		e = old
	}
	k, ok := keyOf(real)
	if !ok {
		return
	}
	e.Format, e.Exe, e.Interp = probeCacheFormat, k, in
	if in.LibPython != "" {
		lk, ok := keyOf(in.LibPython)
		if !ok {
			return
		}
		e.Lib = &lk
	}
	if p != nil {
		b, err := p.MarshalJSON()
		if err != nil {
			return
		}
		e.Platform = b
	}
	c.store(e)
}

// sameFile reports whether an identity was taken of the file k describes.
func sameFile(id *seal.FileIdentity, k *statKey) bool {
	return id != nil && k != nil && id.Path == k.Path && id.Size == k.Size && id.MtimeNS == k.MtimeNS && id.CtimeNS == k.CtNS && id.Ino == k.Ino
}

// identity returns the identity remembered for in, when its executable and
// libpython have the stat they had when it was taken (the stat trust of
// fast verify: hashing a 20 MiB libpython on every create costs more than
// the rest of a warm create's bookkeeping).
func (c ProbeCache) identity(in *Probe) (seal.InterpreterIdentity, bool) {
	e, real, ok := c.load(in.Path)
	if !ok || real != in.Path || e.Identity == nil || e.Interp.Interpreter != in.Interpreter {
		return seal.InterpreterIdentity{}, false
	}
	id := e.Identity
	if !sameFile(&id.FileIdentity, &e.Exe) || (e.Lib == nil) != (id.LibPython == nil) || (e.Lib != nil && !sameFile(id.LibPython, e.Lib)) {
		return seal.InterpreterIdentity{}, false
	}
	if id.Interpreter() != in.Interpreter || id.Implementation != in.Implementation || (id.LibPython != nil && id.LibPython.Path != in.LibPython) {
		return seal.InterpreterIdentity{}, false
	}
	return *id, true
}

// saveIdentity remembers id for in when the files still have the stat it
// was taken at.
func (c ProbeCache) saveIdentity(in *Probe, id seal.InterpreterIdentity) {
	e, real, ok := c.load(in.Path)
	if !ok || real != in.Path {
		return
	}
	if !sameFile(&id.FileIdentity, &e.Exe) || (e.Lib == nil) != (id.LibPython == nil) || (e.Lib != nil && !sameFile(id.LibPython, e.Lib)) {
		return
	}
	e.Identity = &id
	c.store(e)
}

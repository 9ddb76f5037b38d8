package materialize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
)

// Probe is what an env needs to know about the Python it points at, as
// running it once reports it (`python -I -c …`): the interpreter's
// identity, which the materialization digest takes as it is, and the rest
// of the report. ProbeCache stores it as JSON, "path" and "version" (the
// embedded identity) first.
type Probe struct {
	// Interpreter is the real path of sys.executable (python3 on PATH may
	// be a pyenv shim script; the env links to the real binary) and the
	// full version, e.g. "3.11.7" or "3.13.0rc1".
	digest.Interpreter
	// VenvVersion is what python -m venv writes to pyvenv.cfg: "X.Y.Z".
	VenvVersion string `json:"venv_version"`
	// Implementation is sys.implementation.name, e.g. "cpython".
	Implementation string `json:"implementation"`
	// LibPython is the real path of the libpython the process maps, ""
	// when the interpreter is linked statically.
	LibPython string `json:"libpython,omitempty"`
	// Markers are the PEP 508 values the interpreter reports that a
	// platform must agree with.
	Markers map[string]string `json:"markers"`
	// Glibc is the C library version ("2.36"), "" on musl or non-Linux.
	Glibc string `json:"glibc,omitempty"`
	// PointerBits is 64 or 32.
	PointerBits int `json:"pointer_bits"`
	// GILDisabled is true for a free-threaded build.
	GILDisabled bool `json:"gil_disabled"`
	// VenvDir is the directory of the interpreter's venv package (its
	// activate script templates are under scripts/), "" when the
	// interpreter has no venv module.
	VenvDir string `json:"venv_dir,omitempty"`
	// CacheTag is sys.implementation.cache_tag ("cpython-311"), the infix
	// of bytecode file names in __pycache__; "" when the interpreter
	// writes no bytecode.
	CacheTag string `json:"cache_tag"`
	// PycMagic is importlib.util.MAGIC_NUMBER in hex: the first four
	// bytes of every pyc the interpreter writes and reads.
	PycMagic string `json:"pyc_magic"`

	cache ProbeCache // the cache it came from, which also remembers its identity
}

const interpProbe = `import importlib.util, json, os, platform, struct, sys, sysconfig
i = sys.implementation.version
v = "%d.%d.%d" % (i.major, i.minor, i.micro)
if i.releaselevel != "final":
    v += i.releaselevel[0] + str(i.serial)
lib = ""
try:
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split(None, 5)
            if len(p) == 6 and "/libpython" in p[5]:
                lib = os.path.realpath(p[5].strip())
                break
except OSError:
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        c = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("LDLIBRARY") or "")
        if os.path.isfile(c):
            lib = os.path.realpath(c)
try:
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or ""
except (AttributeError, OSError, ValueError):
    glibc = ""
try:
    venv = os.path.dirname(os.path.realpath(importlib.util.find_spec("venv").origin))
except Exception:
    venv = ""
print(json.dumps({
    "path": os.path.realpath(sys.executable) if sys.executable else "",
    "version": v,
    "venv_version": "%d.%d.%d" % sys.version_info[:3],
    "implementation": sys.implementation.name,
    "libpython": lib,
    "glibc": glibc.split(" ")[-1] if glibc.startswith("glibc") else "",
    "pointer_bits": struct.calcsize("P") * 8,
    "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "cache_tag": sys.implementation.cache_tag or "",
    "pyc_magic": importlib.util.MAGIC_NUMBER.hex(),
    "venv_dir": venv,
    "markers": {
        "implementation_name": sys.implementation.name,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
}))
`

// probeWaitDelay bounds the wait for the probe's output to close once the
// interpreter has exited (exec.Cmd.WaitDelay).
const probeWaitDelay = 2 * time.Second

// ProbeInterpreter runs python once in isolated mode and returns what it
// reports. An interpreter that cannot run or answers nonsense is
// materialize_failed; a probe stopped because ctx was cancelled returns
// an error wrapping ctx.Err() (an interruption, not a refusal: the
// interpreter is not at fault). One that exits but leaves a process
// holding its output open is materialize_failed after probeWaitDelay.
func ProbeInterpreter(ctx context.Context, python string) (*Probe, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A bare name is looked up on PATH here: the probe runs with an
	// environment of its own (no PATH), where CPython cannot find itself
	// from argv[0] and reports sys.executable as "" (realpath: the
	// working directory).
	if !strings.Contains(python, "/") {
		lp, err := exec.LookPath(python)
		if err != nil {
			return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot find the interpreter %s on PATH; name a CPython 3.8+ interpreter by its path", python).WithRemedy(refusal.ActionNamePython, "")
		}
		python = lp
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-c", interpProbe)
	cmd.Env = []string{"LC_ALL=C.UTF-8"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// A process the interpreter leaves behind (a wrapper script's
	// background job, a sitecustomize that forks) holds the output open:
	// without a bound, the probe waits for it to end, past a signal.
	cmd.WaitDelay = probeWaitDelay
	out, err := cmd.Output()
	if err := parent.Err(); err != nil {
		return nil, fmt.Errorf("interrupted while probing the interpreter %s: %w", python, err)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "probing the interpreter %s: it exited but left a process running that holds its output open (a wrapper script's background job, or a sitecustomize that starts one), so its answer cannot be trusted; name an interpreter that leaves no process behind, such as the one the wrapper runs", python).WithRemedy(refusal.ActionNamePython, "")
	}
	if err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "cannot run the interpreter %s (%s); name a working CPython 3.8+ interpreter", python, firstLine(stderr.String())).WithRemedy(refusal.ActionNamePython, "")
	}
	return parseProbe(python, out)
}

// parseProbe reads the probe's answer out from the interpreter python.
func parseProbe(python string, out []byte) (*Probe, error) {
	var in Probe
	if err := json.Unmarshal(out, &in); err != nil {
		return nil, refusal.Wrap(refusal.MaterializeFailed, err, "the interpreter %s answered the probe with something else; name a CPython 3.8+ interpreter", python).WithRemedy(refusal.ActionNamePython, "")
	}
	if !filepath.IsAbs(in.Path) || filepath.Clean(in.Path) != in.Path || in.Version == "" || in.Markers["python_version"] == "" {
		return nil, refusal.New(refusal.MaterializeFailed, "the interpreter %s reported no usable executable path or version (%q, %q); name another interpreter", python, in.Path, in.Version).WithRemedy(refusal.ActionNamePython, "")
	}
	if in.LibPython != "" && !filepath.IsAbs(in.LibPython) {
		return nil, refusal.New(refusal.MaterializeFailed, "the interpreter %s reported a relative libpython %q", python, in.LibPython)
	}
	if in.VenvDir != "" && !filepath.IsAbs(in.VenvDir) {
		return nil, refusal.New(refusal.MaterializeFailed, "the interpreter %s reported a relative venv package directory %q", python, in.VenvDir)
	}
	return &in, nil
}

// interpreterIdentity is the seal's record of in (the one conversion of a
// probe into a seal.InterpreterIdentity): remembered by the probe cache in
// came from while its files keep their stat, else hashed.
func interpreterIdentity(in *Probe) (seal.InterpreterIdentity, error) {
	if id, ok := in.cache.identity(in); ok {
		return id, nil
	}
	id, err := seal.IdentityOf(in.Path)
	if err != nil {
		return seal.InterpreterIdentity{}, refusal.Wrap(refusal.MaterializeFailed, err, "cannot identify the interpreter")
	}
	out := seal.InterpreterIdentity{FileIdentity: id, Version: in.Version, Implementation: in.Implementation}
	if in.LibPython != "" {
		lid, err := seal.IdentityOf(in.LibPython)
		if err != nil {
			return seal.InterpreterIdentity{}, refusal.Wrap(refusal.MaterializeFailed, err, "cannot identify the interpreter's libpython")
		}
		out.LibPython = &lid
	}
	in.cache.saveIdentity(in, out)
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "no output"
	}
	return s
}

// CheckPlatform refuses (interpreter_mismatch) an interpreter that cannot
// run the platform's wheels: another implementation, Python version,
// operating system or machine, a free-threaded build for a GIL platform or
// the reverse, a C library other than the platform tag's (glibc for
// manylinux, musl for musllinux), or a glibc older than the manylinux tag.
func (in *Probe) CheckPlatform(p *platform.Platform) error { return in.checkPlatform(p, false) }

// checkPlatform is CheckPlatform; anyMachine accepts another machine (an
// image's tree for another architecture: the host interpreter only lays
// out the venv and compiles bytecode, neither of which depends on it).
func (in *Probe) checkPlatform(p *platform.Platform, anyMachine bool) error {
	mismatch := func(what, got, want string) error {
		return refusal.New(refusal.InterpreterMismatch, "interpreter %s has %s %q but platform %s needs %q; name an interpreter that matches the platform", in.Path, what, got, p.ID(), want).WithRemedy(refusal.ActionNamePython, "")
	}
	for _, k := range []string{"implementation_name", "python_version", "sys_platform", "os_name", "platform_machine"} {
		want := p.Markers[k]
		got := in.Markers[k]
		if k == "platform_machine" {
			if anyMachine {
				continue
			}
			got, want = normMachine(got), normMachine(want)
		}
		if got != want {
			return mismatch(k, in.Markers[k], p.Markers[k])
		}
	}
	if ft := strings.HasSuffix(p.ABI, "t"); ft != in.GILDisabled {
		return mismatch("free-threading", strconv.FormatBool(in.GILDisabled), strconv.FormatBool(ft))
	}
	plat := bestPlatformTag(p)
	switch {
	case strings.HasPrefix(plat, "manylinux"):
		if in.Glibc == "" {
			return mismatch("C library", "not glibc", "glibc")
		}
		var maj, min int
		if _, err := fmt.Sscanf(strings.TrimPrefix(plat, "manylinux_"), "%d_%d_", &maj, &min); err == nil {
			hm, hn, ok := parseXY(in.Glibc)
			if ok && (hm < maj || hm == maj && hn < min) {
				return mismatch("glibc", in.Glibc, fmt.Sprintf("%d.%d or newer", maj, min))
			}
		}
	case strings.HasPrefix(plat, "musllinux"):
		if in.Glibc != "" {
			return mismatch("C library", "glibc "+in.Glibc, "musl")
		}
	}
	return nil
}

func bestPlatformTag(p *platform.Platform) string {
	for _, t := range p.Tags {
		if t.Platform != "any" {
			return t.Platform
		}
	}
	return ""
}

func normMachine(m string) string {
	switch strings.ToLower(m) {
	case "amd64", "x86_64":
		return "x86_64"
	case "arm64", "aarch64":
		return "aarch64"
	}
	return strings.ToLower(m)
}

func parseXY(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	return x, y, ok && err1 == nil && err2 == nil
}

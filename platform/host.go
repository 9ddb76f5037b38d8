package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/internal/capped"
	"github.com/cruxible/cruxprov/internal/elfread"
	"github.com/cruxible/cruxprov/refusal"
)

// probeScript prints, as one JSON object, what Host needs from the
// interpreter: the real path of sys.executable (python3 on PATH may be a
// shim), the PEP 508 values, and the raw inputs of pypa/packaging's tag
// derivation. The tags themselves are derived in Go.
const probeScript = `import importlib.machinery, json, os, platform, struct, sys, sysconfig
def fv(i):
    v = "%d.%d.%d" % (i.major, i.minor, i.micro)
    if i.releaselevel != "final":
        v += i.releaselevel[0] + str(i.serial)
    return v
try:
    glibc = os.confstr("CS_GNU_LIBC_VERSION")
except (AttributeError, OSError, ValueError):
    glibc = None
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
    "implementation_name": sys.implementation.name,
    "implementation_version": fv(sys.implementation.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_python_implementation": platform.python_implementation(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
    "version_info": list(sys.version_info[:2]),
    "sysconfig_platform": sysconfig.get_platform(),
    "pointer_bits": struct.calcsize("P") * 8,
    "glibc": glibc,
    "py_debug": sysconfig.get_config_var("Py_DEBUG"),
    "gil_disabled": sysconfig.get_config_var("Py_GIL_DISABLED"),
    "has_refcount": hasattr(sys, "gettotalrefcount"),
    "debug_ext": "_d.pyd" in importlib.machinery.EXTENSION_SUFFIXES,
    "mac_ver": platform.mac_ver()[0],
    "mac_arch": platform.mac_ver()[2],
}))
`

type probe struct {
	Executable        string  `json:"executable"`
	VersionInfo       [2]int  `json:"version_info"`
	SysconfigPlatform string  `json:"sysconfig_platform"`
	PointerBits       int     `json:"pointer_bits"`
	Glibc             *string `json:"glibc"`
	PyDebug           *int    `json:"py_debug"`
	GILDisabled       *int    `json:"gil_disabled"`
	HasRefcount       bool    `json:"has_refcount"`
	DebugExt          bool    `json:"debug_ext"`
	MacVer            string  `json:"mac_ver"`
	MacArch           string  `json:"mac_arch"`
}

// hostProbeTimeout bounds the probe; a healthy interpreter answers in well
// under a second.
const hostProbeTimeout = 30 * time.Second

// probeWaitDelay bounds the wait for the probe's output to close once the
// interpreter has exited: a process it left behind (a wrapper script's
// background job, a sitecustomize that forks) holds the pipe open, and
// the probe would otherwise wait for that process to end, past a signal.
const probeWaitDelay = 2 * time.Second

// Host probes the interpreter python once (`python -I -c …`) and derives
// its platform in Go: markers as the interpreter reports them, tags in the
// order pypa/packaging's sys_tags gives for it — with linux_<arch> last
// among the platforms, as pip's vendored packaging and uv rank it (see
// docs/platforms.md). Interpreter is the real path of sys.executable.
// Anything but CPython 3.8+ is refused platform_unsupported, as is an
// interpreter that exits but leaves a process holding its output open
// (after probeWaitDelay, not when that process ends).
func Host(ctx context.Context, python string) (*Platform, error) {
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-I", "-c", probeScript)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = probeWaitDelay
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		if errors.Is(err, exec.ErrWaitDelay) {
			return nil, refusal.Wrap(refusal.PlatformUnsupported, err, "probing interpreter %s: it exited but left a process running that holds its output open (a wrapper script's background job, or a sitecustomize that starts one), so its answer cannot be trusted; name an interpreter that leaves no process behind, such as the one the wrapper runs", python).WithRemedy(refusal.ActionNamePython, "")
		}
		said := ""
		if l := lastLine(stderr.String()); l != "" {
			said = " (" + l + ")"
		}
		return nil, refusal.Wrap(refusal.PlatformUnsupported, err, "probing interpreter %s failed%s; name a working CPython interpreter", python, said).WithRemedy(refusal.ActionNamePython, "")
	}
	p, err := hostFromProbe(ctx, stdout.Bytes())
	if err != nil && len(bytes.TrimSpace(stdout.Bytes())) == 0 {
		// It ran and said nothing: not a Python that ran the probe.
		return nil, refusal.New(refusal.PlatformUnsupported, "%s answered nothing to the probe (it exited 0 and printed nothing): it is not a CPython interpreter; name one (python3.11, /usr/bin/python3)", python).WithRemedy(refusal.ActionNamePython, "")
	}
	return p, err
}

// lastLine is s's last non-empty line (an exception's message ends a
// traceback), at most 200 bytes of it.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func hostFromProbe(ctx context.Context, out []byte) (*Platform, error) {
	bad := func(format string, args ...any) (*Platform, error) {
		return nil, refusal.New(refusal.PlatformUnsupported, "host interpreter: "+format, args...)
	}
	var pr probe
	if err := json.Unmarshal(out, &pr); err != nil {
		return bad("unreadable probe output: %v", err)
	}
	markers := map[string]string{}
	var raw map[string]any
	_ = json.Unmarshal(out, &raw)
	for _, k := range MarkerVariables {
		s, ok := raw[k].(string)
		if !ok {
			return bad("probe lacks marker variable %s", k)
		}
		markers[k] = s
	}
	if markers["implementation_name"] != "cpython" {
		return bad("%s is %s; cruxprov supports CPython only", pr.Executable, markers["implementation_name"])
	}
	major, minor := pr.VersionInfo[0], pr.VersionInfo[1]
	if major != 3 || minor < 8 {
		return bad("%s is Python %d.%d; cruxprov needs CPython 3.8 or newer", pr.Executable, major, minor)
	}
	if minor > maxPythonMinor {
		// The tags are made for every minor from it down (3.30000 made
		// 2.4 million): a version no CPython has is refused.
		return bad("%s reports Python %d.%d, not a version CPython has; name another interpreter", pr.Executable, major, minor)
	}
	abis := cpythonABIs(minor, pr)
	plats, err := hostPlatforms(ctx, pr, markers["sys_platform"])
	if err != nil {
		return nil, err
	}
	if len(plats) == 0 {
		return bad("%s: no platform tags for %q", pr.Executable, pr.SysconfigPlatform)
	}
	v := strconv.Itoa(major) + "." + strconv.Itoa(minor)
	lib := "lib/python" + v
	if isThreaded(abis) {
		lib += "t"
	}
	if markers["sys_platform"] == "win32" {
		lib = "Lib"
	}
	return &Platform{
		Implementation: "cp",
		PythonVersion:  v,
		ABI:            abis[0],
		LibDir:         lib,
		Markers:        markers,
		Tags:           supportedTags(major, minor, abis, plats),
		Interpreter:    pr.Executable,
	}, nil
}

// cpythonABIs is packaging's _cpython_abis for CPython 3.8+.
func cpythonABIs(minor int, pr probe) []string {
	version := "3" + strconv.Itoa(minor)
	threading, debug := "", ""
	if pr.PyDebug != nil && *pr.PyDebug != 0 || pr.PyDebug == nil && (pr.HasRefcount || pr.DebugExt) {
		debug = "d"
	}
	if minor >= 13 && pr.GILDisabled != nil && *pr.GILDisabled != 0 {
		threading = "t"
	}
	abis := []string{"cp" + version + threading + debug}
	if debug != "" {
		abis = append(abis, "cp"+version+threading)
	}
	return abis
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9_]`)

// normalizePlatform is packaging's _normalize_string: "-" and "." become "_".
func normalizePlatform(s string) string {
	return nonAlnum.ReplaceAllString(strings.NewReplacer("-", "_", ".", "_", " ", "_").Replace(s), "_")
}

func hostPlatforms(ctx context.Context, pr probe, sysPlatform string) ([]string, error) {
	switch {
	case sysPlatform == "darwin":
		a, b, ok := parseMacVer(pr.MacVer)
		if !ok {
			return nil, refusal.New(refusal.PlatformUnsupported, "host interpreter: macOS version %q unreadable", pr.MacVer)
		}
		if !plausibleVersion(a, b) {
			return nil, refusal.New(refusal.PlatformUnsupported, "host interpreter: macOS version %q is not one a Mac reports; name another interpreter", pr.MacVer).WithRemedy(refusal.ActionNamePython, "")
		}
		arch := pr.MacArch // packaging's _mac_arch
		if pr.PointerBits == 32 {
			arch = "i386"
			if strings.HasPrefix(pr.MacArch, "ppc") {
				arch = "ppc"
			}
		}
		return macPlatforms([2]int{a, b}, arch), nil
	case strings.HasPrefix(sysPlatform, "linux"):
		linux := normalizePlatform(pr.SysconfigPlatform)
		if !strings.HasPrefix(linux, "linux_") {
			return []string{linux}, nil
		}
		if pr.PointerBits == 32 {
			switch linux {
			case "linux_x86_64":
				linux = "linux_i686"
			case "linux_aarch64":
				linux = "linux_armv8l"
			}
		}
		arch := strings.TrimPrefix(linux, "linux_")
		archs := []string{arch}
		if arch == "armv8l" {
			archs = []string{"armv8l", "armv7l"}
		}
		var plats []string
		if g, ok := parseGlibc(pr.Glibc); ok {
			if !plausibleVersion(g[0], g[1]) {
				return nil, refusal.New(refusal.PlatformUnsupported, "host interpreter: glibc version %q is not one a C library reports; name another interpreter", *pr.Glibc).WithRemedy(refusal.ActionNamePython, "")
			}
			for _, a := range archs {
				plats = append(plats, manylinuxPlatforms(g[0], g[1], a)...)
			}
		} else if mj, mn, ok := muslVersion(ctx, pr.Executable); ok {
			if !plausibleVersion(mj, mn) {
				return nil, refusal.New(refusal.PlatformUnsupported, "host interpreter: its musl loader reports the version %d.%d, not one musl has; name another interpreter", mj, mn).WithRemedy(refusal.ActionNamePython, "")
			}
			for _, a := range archs {
				plats = append(plats, musllinuxPlatforms(mj, mn, a)...)
			}
		}
		for _, a := range archs {
			plats = append(plats, "linux_"+a)
		}
		return plats, nil
	default:
		return []string{normalizePlatform(pr.SysconfigPlatform)}, nil
	}
}

// maxPythonMinor bounds the minor version of Python 3 the probe may report.
const maxPythonMinor = 99

// maxVersionPart bounds each part of a C library's or macOS's version as
// the probe reports it: the tags are made from every version from it down
// (glibc 2.39 makes some forty), so a program that says glibc 2.3000000
// would make 81 million tags, minutes and gigabytes; none is near it.
const maxVersionPart = 999

// plausibleVersion reports whether major.minor is within maxVersionPart.
func plausibleVersion(major, minor int) bool {
	return major >= 0 && minor >= 0 && major <= maxVersionPart && minor <= maxVersionPart
}

var glibcRE = regexp.MustCompile(`^glibc (\d+)\.(\d+)`)

func parseGlibc(s *string) ([2]int, bool) {
	if s == nil {
		return [2]int{}, false
	}
	m := glibcRE.FindStringSubmatch(*s)
	if m == nil {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(m[1])
	b, err2 := strconv.Atoi(m[2])
	return [2]int{a, b}, err1 == nil && err2 == nil
}

var macVerRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

func parseMacVer(s string) (int, int, bool) {
	m := macVerRE.FindStringSubmatch(s)
	if m == nil {
		if n, err := strconv.Atoi(s); err == nil {
			return n, 0, true
		}
		return 0, 0, false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a, b, true
}

// muslVersion is packaging's _get_musl_version: the ELF interpreter of the
// executable, run without arguments, prints its version on stderr.
func muslVersion(ctx context.Context, executable string) (int, int, bool) {
	f, err := capped.Open(executable)
	if err != nil {
		return 0, 0, false
	}
	info, err := elfread.Read(f, elfread.Options{})
	f.Close()
	if err != nil {
		return 0, 0, false
	}
	ld := info.Interp
	if !strings.Contains(ld, "musl") {
		return 0, 0, false
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ld)
	cmd.Stderr = &stderr
	cmd.WaitDelay = probeWaitDelay
	_ = cmd.Run() // the loader exits non-zero when given no program
	return parseMuslLoaderOutput(stderr.String())
}

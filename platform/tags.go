package platform

import (
	"regexp"
	"strconv"
	"strings"
)

// This file derives ordered tag lists exactly as pypa/packaging's tags
// module does (cpython_tags, compatible_tags, mac_platforms, and the
// manylinux and musllinux platform_tags), so a target's list can be
// computed in Go for an explicit interpreter.

// cpythonTags is packaging's cpython_tags(python_version, abis, platforms):
// cpXY with each ABI, then abi3 (abi3t for a free-threaded build), then
// none, then abi3 for every older minor down to 3.2.
func cpythonTags(major, minor int, abis []string, platforms []string) []Tag {
	interp := "cp" + strconv.Itoa(major) + strconv.Itoa(minor)
	var rest []string
	for _, a := range abis {
		if a != "abi3" && a != "none" && a != "abi3t" {
			rest = append(rest, a)
		}
	}
	var out []Tag
	for _, a := range rest {
		for _, p := range platforms {
			out = append(out, Tag{interp, a, p})
		}
	}
	threaded := isThreaded(rest)
	stable := "abi3"
	if threaded {
		stable = "abi3t"
	}
	useStable := major > 3 || major == 3 && minor >= 2
	if useStable {
		for _, p := range platforms {
			out = append(out, Tag{interp, stable, p})
		}
	}
	for _, p := range platforms {
		out = append(out, Tag{interp, "none", p})
	}
	if useStable {
		for m := minor - 1; m > 1; m-- {
			in := "cp" + strconv.Itoa(major) + strconv.Itoa(m)
			for _, p := range platforms {
				out = append(out, Tag{in, stable, p})
			}
		}
	}
	return out
}

var cpABIRE = regexp.MustCompile(`^cp\d+(.*)$`)

// isThreaded is packaging's _is_threaded_cpython: the first ABI's flags
// contain "t".
func isThreaded(abis []string) bool {
	if len(abis) == 0 {
		return false
	}
	m := cpABIRE.FindStringSubmatch(abis[0])
	return m != nil && strings.Contains(m[1], "t")
}

// pyInterpreterRange is packaging's _py_interpreter_range: pyXY, pyX, then
// pyX(Y-1) down to pyX0.
func pyInterpreterRange(major, minor int) []string {
	mj := strconv.Itoa(major)
	out := []string{"py" + mj + strconv.Itoa(minor), "py" + mj}
	for m := minor - 1; m >= 0; m-- {
		out = append(out, "py"+mj+strconv.Itoa(m))
	}
	return out
}

// compatibleTags is packaging's compatible_tags(python_version,
// interpreter, platforms).
func compatibleTags(major, minor int, interpreter string, platforms []string) []Tag {
	var out []Tag
	rng := pyInterpreterRange(major, minor)
	for _, v := range rng {
		for _, p := range platforms {
			out = append(out, Tag{v, "none", p})
		}
	}
	if interpreter != "" {
		out = append(out, Tag{interpreter, "none", "any"})
	}
	for _, v := range rng {
		out = append(out, Tag{v, "none", "any"})
	}
	return out
}

// supportedTags is what sys_tags yields for a CPython with these ABIs and
// platforms: cpython_tags then compatible_tags with interpreter cpXY.
func supportedTags(major, minor int, abis, platforms []string) []Tag {
	out := cpythonTags(major, minor, abis, platforms)
	return append(out, compatibleTags(major, minor, "cp"+strconv.Itoa(major)+strconv.Itoa(minor), platforms)...)
}

// lastGlibcMinor is packaging's _LAST_GLIBC_MINOR: glibc 1.x ended at 1.x.
var lastGlibcMinor = map[int]int{1: 12}

// legacyManylinux maps a glibc version to its legacy alias (PEP 513, 571,
// 599), yielded right after its manylinux_2_N twin.
var legacyManylinux = map[[2]int]string{
	{2, 17}: "manylinux2014",
	{2, 12}: "manylinux2010",
	{2, 5}:  "manylinux1",
}

// manylinuxArchOK is packaging's _have_compatible_abi, without the ELF
// checks for armv7l (hard-float) and i686, which cruxprov assumes.
func manylinuxArchOK(arch string) bool {
	switch arch {
	case "x86_64", "aarch64", "ppc64", "ppc64le", "s390x", "loongarch64", "riscv64", "i686", "armv7l":
		return true
	}
	return false
}

// manylinuxPlatforms is packaging's _manylinux.platform_tags for one
// architecture and the system's glibc: manylinux_2_N from the system's
// glibc down (to 2.5 on x86_64 and i686, 2.17 elsewhere), each legacy
// alias right after its twin.
func manylinuxPlatforms(glibcMajor, glibcMinor int, arch string) []string {
	if !manylinuxArchOK(arch) {
		return nil
	}
	tooOld := [2]int{2, 16}
	if arch == "x86_64" || arch == "i686" {
		tooOld = [2]int{2, 4}
	}
	type gv struct{ major, minor int }
	maxes := []gv{{glibcMajor, glibcMinor}}
	for m := glibcMajor - 1; m > 1; m-- {
		maxes = append(maxes, gv{m, lastGlibcMinor[m]})
	}
	var out []string
	for _, g := range maxes {
		minMinor := -1
		if g.major == tooOld[0] {
			minMinor = tooOld[1]
		}
		for mn := g.minor; mn > minMinor; mn-- {
			out = append(out, "manylinux_"+strconv.Itoa(g.major)+"_"+strconv.Itoa(mn)+"_"+arch)
			if legacy, ok := legacyManylinux[[2]int{g.major, mn}]; ok {
				out = append(out, legacy+"_"+arch)
			}
		}
	}
	return out
}

// musllinuxPlatforms is packaging's _musllinux.platform_tags for one
// architecture: musllinux_X_Y from the system's musl minor down to 0.
func musllinuxPlatforms(major, minor int, arch string) []string {
	var out []string
	for m := minor; m >= 0; m-- {
		out = append(out, "musllinux_"+strconv.Itoa(major)+"_"+strconv.Itoa(m)+"_"+arch)
	}
	return out
}

var muslVersionRE = regexp.MustCompile(`(?m)^Version (\d+)\.(\d+)`)

// parseMuslLoaderOutput is packaging's _parse_musl_version: the banner the
// musl loader prints on stderr when run without arguments.
func parseMuslLoaderOutput(out string) (major, minor int, ok bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "musl") {
		return 0, 0, false
	}
	m := muslVersionRE.FindStringSubmatch(strings.Join(lines[1:], "\n"))
	if m == nil {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(m[1])
	b, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return a, b, true
}

func versionLess(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// macBinaryFormats is packaging's _mac_binary_formats.
func macBinaryFormats(version [2]int, arch string) []string {
	formats := []string{arch}
	switch arch {
	case "x86_64":
		if versionLess(version, [2]int{10, 4}) {
			return nil
		}
		formats = append(formats, "intel", "fat64", "fat3")
	case "i386":
		if versionLess(version, [2]int{10, 4}) {
			return nil
		}
		formats = append(formats, "intel", "fat3", "fat")
	case "ppc64":
		if versionLess([2]int{10, 5}, version) || versionLess(version, [2]int{10, 4}) {
			return nil
		}
		formats = append(formats, "fat64")
	case "ppc":
		if versionLess([2]int{10, 6}, version) {
			return nil
		}
		formats = append(formats, "fat3", "fat")
	}
	if arch == "arm64" || arch == "x86_64" {
		formats = append(formats, "universal2")
	}
	switch arch {
	case "x86_64", "i386", "intel", "ppc", "ppc64", "fat", "fat3", "fat64":
		formats = append(formats, "universal")
	}
	return formats
}

// macPlatforms is packaging's mac_platforms(version, arch): before macOS
// 11 each release bumped the minor (10.N down to 10.0); from 11 on each
// release bumps the major (N_0 down to 11_0), followed by 10.16 down to
// 10.4 (every format on x86_64, only universal2 on arm64).
func macPlatforms(version [2]int, arch string) []string {
	var out []string
	add := func(major, minor int, formats []string) {
		for _, f := range formats {
			out = append(out, "macosx_"+strconv.Itoa(major)+"_"+strconv.Itoa(minor)+"_"+f)
		}
	}
	if !versionLess(version, [2]int{10, 0}) && versionLess(version, [2]int{11, 0}) {
		for mn := version[1]; mn >= 0; mn-- {
			add(10, mn, macBinaryFormats([2]int{10, mn}, arch))
		}
	}
	if !versionLess(version, [2]int{11, 0}) {
		for mj := version[0]; mj > 10; mj-- {
			add(mj, 0, macBinaryFormats([2]int{mj, 0}, arch))
		}
		for mn := 16; mn > 3; mn-- {
			if arch == "x86_64" {
				add(10, mn, macBinaryFormats([2]int{10, mn}, arch))
			} else {
				add(10, mn, []string{"universal2"})
			}
		}
	}
	return out
}

// interpreterShortName is packaging's INTERPRETER_SHORT_NAMES mapping.
func interpreterShortName(implementation string) string {
	switch strings.ToLower(implementation) {
	case "python":
		return "py"
	case "cpython":
		return "cp"
	case "pypy":
		return "pp"
	case "ironpython":
		return "ip"
	case "jython":
		return "jy"
	}
	return strings.ToLower(implementation)
}

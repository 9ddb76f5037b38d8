package platform

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cruxible/cruxprov/refusal"
)

// The preset ranges (DESIGN §4). A preset's name is its canonical id.
var (
	presetMinors = []int{9, 10, 11, 12, 13, 14}  // CPython 3.9–3.14
	glibcMinors  = [2]int{17, 39}                // manylinux_2_17 … manylinux_2_39
	muslMinors   = []int{1, 2}                   // musllinux_1_1, musllinux_1_2
	linuxArches  = []string{"x86_64", "aarch64"} // Linux presets
	macArm64     = [][2]int{{11, 0}, {12, 0}, {13, 0}, {14, 0}, {15, 0}}
	macX8664     = [][2]int{{10, 9}, {10, 10}, {10, 11}, {10, 12}, {10, 13}, {10, 14}, {10, 15}, {11, 0}, {12, 0}, {13, 0}, {14, 0}, {15, 0}}
	windowsPlats = map[string]string{"win_amd64": "AMD64", "win_arm64": "ARM64", "win32": "x86"}
)

// Presets returns the names of the built-in platforms, sorted. Each name
// is the platform's canonical id, e.g. cp312-manylinux_2_39_x86_64.
func Presets() []string {
	var out []string
	for _, mn := range presetMinors {
		cp := "cp3" + strconv.Itoa(mn) + "-"
		for _, arch := range linuxArches {
			for g := glibcMinors[0]; g <= glibcMinors[1]; g++ {
				out = append(out, cp+"manylinux_2_"+strconv.Itoa(g)+"_"+arch)
			}
			for _, m := range muslMinors {
				out = append(out, cp+"musllinux_1_"+strconv.Itoa(m)+"_"+arch)
			}
		}
		for _, v := range macArm64 {
			out = append(out, cp+"macosx_"+strconv.Itoa(v[0])+"_"+strconv.Itoa(v[1])+"_arm64")
		}
		for _, v := range macX8664 {
			out = append(out, cp+"macosx_"+strconv.Itoa(v[0])+"_"+strconv.Itoa(v[1])+"_x86_64")
		}
		for w := range windowsPlats {
			out = append(out, cp+w)
		}
	}
	slices.SortFunc(out, naturalCompare)
	return out
}

// naturalCompare orders IDs as a reader does: runs of digits by their
// value (cp39 before cp310, macosx_10_9 before macosx_10_10), the rest
// byte by byte; equal so (leading zeros), byte by byte in full.
func naturalCompare(a, b string) int {
	if c := naturalRuns(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func naturalRuns(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			x, y := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Compare(len(x), len(y)); c != 0 {
				return c
			}
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

var presetRE = regexp.MustCompile(`^cp3(\d+)-(?:manylinux_2_(\d+)_(x86_64|aarch64)|musllinux_1_(\d+)_(x86_64|aarch64)|macosx_(\d+)_(\d+)_(arm64|x86_64)|(win_amd64|win_arm64|win32))$`)

// Lookup returns the preset named name (its canonical id), or a
// refusal.PlatformUnsupported naming how to list the presets.
func Lookup(name string) (*Platform, error) {
	unknown := refusal.New(refusal.PlatformUnsupported, "no platform preset %q (a preset id, a platform file or the host's platform are what can be named)", name).WithRemedy(refusal.ActionPlatformList, "")
	m := presetRE.FindStringSubmatch(name)
	if m == nil {
		return nil, unknown
	}
	minor, _ := strconv.Atoi(m[1])
	if !containsInt(presetMinors, minor) || strconv.Itoa(minor) != m[1] {
		return nil, unknown
	}
	var p *Platform
	switch {
	case m[2] != "":
		g, _ := strconv.Atoi(m[2])
		if g < glibcMinors[0] || g > glibcMinors[1] || strconv.Itoa(g) != m[2] {
			return nil, unknown
		}
		p = posix(minor, "linux", "Linux", m[3], manylinuxPlatforms(2, g, m[3]))
	case m[4] != "":
		mm, _ := strconv.Atoi(m[4])
		if !containsInt(muslMinors, mm) || strconv.Itoa(mm) != m[4] {
			return nil, unknown
		}
		p = posix(minor, "linux", "Linux", m[5], musllinuxPlatforms(1, mm, m[5]))
	case m[6] != "":
		a, _ := strconv.Atoi(m[6])
		b, _ := strconv.Atoi(m[7])
		list := macArm64
		if m[8] == "x86_64" {
			list = macX8664
		}
		found := false
		for _, v := range list {
			if v == [2]int{a, b} && strconv.Itoa(a) == m[6] && strconv.Itoa(b) == m[7] {
				found = true
			}
		}
		if !found {
			return nil, unknown
		}
		p = posix(minor, "darwin", "Darwin", m[8], macPlatforms([2]int{a, b}, m[8]))
	default:
		p = posix(minor, "win32", "Windows", windowsPlats[m[9]], []string{m[9]})
		p.Markers["os_name"] = "nt"
		p.LibDir = "Lib"
	}
	if p.ID() != name {
		return nil, unknown
	}
	return p, nil
}

// posix builds a CPython 3.minor preset with the given platform tags.
func posix(minor int, sysPlatform, system, machine string, plats []string) *Platform {
	v := "3." + strconv.Itoa(minor)
	full := fullVersion(3, minor)
	abi := "cp3" + strconv.Itoa(minor)
	return &Platform{
		Implementation: "cp",
		PythonVersion:  v,
		ABI:            abi,
		LibDir:         "lib/python" + v,
		Markers: map[string]string{
			"implementation_name":            "cpython",
			"implementation_version":         full,
			"os_name":                        "posix",
			"platform_machine":               machine,
			"platform_python_implementation": "CPython",
			"platform_release":               "",
			"platform_system":                system,
			"platform_version":               "",
			"python_full_version":            full,
			"python_version":                 v,
			"sys_platform":                   sysPlatform,
		},
		Tags: supportedTags(3, minor, []string{abi}, plats),
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// idRE is the shape of a platform's id (Platform.ID): CPython's
// "cp3Y" (a free-threaded one's "cp3Yt") and its best platform tag, one
// tag component, which a preset, host or a platform file may name.
var idRE = regexp.MustCompile(`^cp3(?:0|[1-9][0-9]*)t?-[A-Za-z0-9_]+$`)

// CheckID holds a platform id a command names to pick a pinned
// materialization (not to build one) to what can be a platform: "host",
// a preset id, or an id of the shape Platform.ID gives (a platform file's
// or a host's, which a pin may name). Anything else is refused
// platform_unsupported, as Lookup refuses it, naming how to list the
// presets: a pin lookup for it said only that the pin has no
// materialization for it, and advised proposing the provider again for it.
func CheckID(id string) error {
	if id == "host" || idRE.MatchString(id) {
		return nil
	}
	return refusal.New(refusal.PlatformUnsupported, "no platform %q: a platform is named by a preset id, the id of a platform file or host", id).WithRemedy(refusal.ActionPlatformList, "")
}

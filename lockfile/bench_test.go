package lockfile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/platform"
)

// benchLock generates a lock of n packages, each with five wheels of
// various tags and, for most, one of a dozen markers.
func benchLock(n int) []byte {
	markers := []string{
		"", `sys_platform == "linux"`, `python_version >= "3.10"`,
		`platform_machine == "x86_64" or sys_platform == "darwin"`,
		`sys_platform != "win32" and python_full_version >= "3.9.1"`,
		`implementation_name == "cpython"`, `"dev" in dependency_groups or os_name == "posix"`,
		`python_version < "3.15"`, `platform_system != "Java"`, "",
		`(sys_platform == "linux" and platform_machine == "aarch64") or python_version >= "3.9"`,
		`os_name == "nt" or os_name == "posix"`,
	}
	var b strings.Builder
	b.WriteString("lock-version = \"1.0\"\ncreated-by = \"bench\"\nrequires-python = \">=3.9\"\n")
	h := strings.Repeat("ab", 32)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pkg-%04d", i)
		dist := strings.ReplaceAll(name, "-", "_")
		fmt.Fprintf(&b, "\n[[packages]]\nname = %q\nversion = \"1.%d.0\"\n", name, i%7)
		if m := markers[i%len(markers)]; m != "" {
			fmt.Fprintf(&b, "marker = '%s'\n", m)
		}
		for _, tag := range []string{
			"cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64",
			"cp312-cp312-manylinux_2_28_aarch64",
			"cp312-cp312-macosx_11_0_arm64",
			"cp312-cp312-win_amd64",
			"py3-none-any",
		} {
			fmt.Fprintf(&b, "[[packages.wheels]]\nurl = \"https://files.example/%s/%s-1.%d.0-%s.whl\"\nsize = %d\nhashes = { sha256 = \"%s\" }\n", name, dist, i%7, tag, 1000+i, h)
		}
	}
	return []byte(b.String())
}

var benchPlatforms = []string{
	"cp312-manylinux_2_17_x86_64", "cp312-manylinux_2_28_x86_64", "cp312-manylinux_2_39_x86_64",
	"cp312-manylinux_2_28_aarch64", "cp312-musllinux_1_2_x86_64", "cp312-macosx_14_0_arm64",
	"cp312-macosx_10_15_x86_64", "cp312-win_amd64", "cp313-manylinux_2_28_x86_64", "cp311-manylinux_2_28_x86_64",
}

func BenchmarkParseLock1000(b *testing.B) {
	data := benchLock(1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve1000x10 resolves a parsed 1,000-package lock for 10
// platforms per iteration; ns/op / 10,000 is the cost per package-platform.
func BenchmarkResolve1000x10(b *testing.B) {
	benchResolve(b, 1000)
}

// BenchmarkResolve100x10 shows that allocations grow linearly with the lock.
func BenchmarkResolve100x10(b *testing.B) {
	benchResolve(b, 100)
}

func benchResolve(b *testing.B, n int) {
	l, _, err := Parse(benchLock(n))
	if err != nil {
		b.Fatal(err)
	}
	var ps []*platform.Platform
	for _, name := range benchPlatforms {
		ps = append(ps, preset(b, name))
	}
	b.ReportAllocs()
	for b.Loop() {
		reps, err := ResolveAll(l, ps, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(reps) != len(ps) {
			b.Fatal("short")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*len(ps)), "ns/pkg-platform")
}

func TestBenchLockResolves(t *testing.T) {
	l, _, err := Parse(benchLock(50))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range benchPlatforms {
		t.Run(name, func(t *testing.T) {
			if _, err := Resolve(l, preset(t, name), Options{}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
}

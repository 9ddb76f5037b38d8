package platform

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// FuzzHostFromProbe: whatever the host interpreter answers the probe with
// (the operator's --python, which may be any program), hostFromProbe makes
// a platform or a platform_unsupported refusal, without panicking and with
// a tag list bounded by what real interpreters report (a glibc, musl or
// macOS version of absurd size must not make billions of tags). The
// executable is pinned to a path that does not exist: the musl probe would
// otherwise run the named file's ELF interpreter.
func FuzzHostFromProbe(f *testing.F) {
	base := `{"executable":"/usr/bin/python3","version_info":[3,12],"sysconfig_platform":"linux-x86_64","pointer_bits":64,"glibc":"glibc 2.39","py_debug":0,"gil_disabled":0,"has_refcount":false,"debug_ext":false,"mac_ver":"","mac_arch":"","implementation_name":"cpython","implementation_version":"3.12.3","os_name":"posix","platform_machine":"x86_64","platform_python_implementation":"CPython","platform_release":"6.1","platform_system":"Linux","platform_version":"#1","python_full_version":"3.12.3","python_version":"3.12","sys_platform":"linux"}`
	f.Add([]byte(base))
	f.Add([]byte(`{"version_info":[3,13],"sysconfig_platform":"macosx-14.0-arm64","pointer_bits":64,"mac_ver":"14.5","mac_arch":"arm64","gil_disabled":1,"implementation_name":"cpython","implementation_version":"3.13.0","os_name":"posix","platform_machine":"arm64","platform_python_implementation":"CPython","platform_release":"23","platform_system":"Darwin","platform_version":"x","python_full_version":"3.13.0","python_version":"3.13","sys_platform":"darwin"}`))
	f.Add([]byte(`{"version_info":[3,12],"sysconfig_platform":"win-amd64","implementation_name":"cpython","sys_platform":"win32"}`))
	f.Add([]byte(`{"implementation_name":"pypy"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, out []byte) {
		var m map[string]any
		if json.Unmarshal(out, &m) == nil && m != nil {
			m["executable"] = "/nonexistent/python3"
			out, _ = json.Marshal(m)
		}
		p, err := hostFromProbe(context.Background(), out)
		if err != nil {
			if refusal.CodeOf(err) != refusal.PlatformUnsupported {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(p.Tags) == 0 || len(p.Tags) > 100000 {
			t.Fatalf("%d tags", len(p.Tags))
		}
	})
}

// TestHostImplausibleVersions: a probe that reports a glibc or macOS
// version no system has is refused, not turned into one tag per version
// below it (glibc 2.3000000 made 81 million tags in 80 seconds), nor a
// Python 3 minor no CPython has (3.30000 made 2.4 million).
func TestHostImplausibleVersions(t *testing.T) {
	probe := func(kv string) []byte {
		return []byte(`{"executable":"/nonexistent/python3","version_info":[3,12],"sysconfig_platform":"linux-x86_64","pointer_bits":64,` + kv + `,"implementation_name":"cpython","implementation_version":"3.12.3","os_name":"posix","platform_machine":"x86_64","platform_python_implementation":"CPython","platform_release":"6.1","platform_system":"Linux","platform_version":"#1","python_full_version":"3.12.3","python_version":"3.12"}`)
	}
	for _, kv := range []string{
		`"glibc":"glibc 2.3000000","sys_platform":"linux"`,
		`"glibc":"glibc 300000.1","sys_platform":"linux"`,
		`"mac_ver":"3000000.1","mac_arch":"arm64","sys_platform":"darwin"`,
		`"mac_ver":"10.30000000","mac_arch":"x86_64","sys_platform":"darwin"`,
		`"glibc":"glibc 2.39","sys_platform":"linux","version_info":[3,30000]`,
	} {
		p, err := hostFromProbe(context.Background(), probe(kv))
		if refusal.CodeOf(err) != refusal.PlatformUnsupported {
			n := 0
			if p != nil {
				n = len(p.Tags)
			}
			t.Errorf("%s: %v (%d tags), want platform_unsupported", kv, err, n)
		}
	}
	// Real ones still read.
	for _, kv := range []string{`"glibc":"glibc 2.39","sys_platform":"linux"`, `"mac_ver":"14.5","mac_arch":"arm64","sys_platform":"darwin"`} {
		if _, err := hostFromProbe(context.Background(), probe(kv)); err != nil {
			t.Errorf("%s: %v", kv, err)
		}
	}
}

// FuzzParseMuslLoaderOutput: whatever the musl loader of the interpreter
// prints, the version read is one it printed, on a "Version X.Y" line
// after a first line starting "musl".
func FuzzParseMuslLoaderOutput(f *testing.F) {
	for _, s := range []string{"musl libc (x86_64)\nVersion 1.2.4\nDynamic Program Loader\n", "musl\nVersion 99999999999999999999.1\n", "glibc\nVersion 2.39\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		major, minor, ok := parseMuslLoaderOutput(out)
		if !ok {
			return
		}
		m := regexp.MustCompile(`(?m)^Version 0*(\d+)\.0*(\d+)`).FindStringSubmatch(out)
		if major < 0 || minor < 0 || !strings.HasPrefix(strings.TrimSpace(out), "musl") || m == nil || strings.TrimLeft(m[1], "0") != strings.TrimLeft(strconv.Itoa(major), "0") || strings.TrimLeft(m[2], "0") != strings.TrimLeft(strconv.Itoa(minor), "0") {
			t.Fatalf("%q read as %d.%d", out, major, minor)
		}
	})
}

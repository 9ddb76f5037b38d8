package marker

import "testing"

// realistic markers as they appear in wheels' metadata and pylock.toml.
var benchMarkers = []string{
	`sys_platform == "linux" and platform_machine == "x86_64" and python_version >= "3.9"`,
	`python_full_version < "3.11"`,
	`extra == "socks"`,
	`platform_system == "Windows"`,
	`python_version < "3.8" and implementation_name == "cpython"`,
	`(sys_platform == "darwin" or sys_platform == "linux") and platform_python_implementation != "PyPy"`,
	`python_version >= "3.9" and python_version < "3.13"`,
	`os_name == "nt" or platform_machine in "x86_64 aarch64"`,
}

func benchEnv(b testing.TB) *Env {
	env, err := NewEnv(map[string]string{
		"implementation_name": "cpython", "implementation_version": "3.12.4", "os_name": "posix",
		"platform_machine": "x86_64", "platform_release": "", "platform_system": "Linux",
		"platform_version": "", "python_full_version": "3.12.4",
		"platform_python_implementation": "CPython", "python_version": "3.12", "sys_platform": "linux",
	})
	if err != nil {
		b.Fatal(err)
	}
	return env
}

func BenchmarkMarkerEvaluate(b *testing.B) {
	env := benchEnv(b)
	ms := make([]Marker, len(benchMarkers))
	for i, s := range benchMarkers {
		ms[i] = mustParse(b, s)
	}
	for _, bc := range []struct {
		name string
		m    []Marker
	}{
		{"three-clauses", ms[:1]},
		{"python_full_version", ms[1:2]},
		{"extra", ms[2:3]},
		{"mix-of-8", ms},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, m := range bc.m {
					if ok, err := m.Evaluate(env); err != nil {
						b.Fatal(err)
					} else if ok {
						n++
					}
				}
			}
			_ = n
		})
	}
}

func BenchmarkMarkerParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range benchMarkers {
			if _, err := Parse(s); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func mustParse(tb testing.TB, s string) Marker {
	tb.Helper()
	m, err := Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

package materialize

import (
	"testing"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

// FuzzParseProbe: whatever the operator's interpreter answers the probe
// with, parseProbe takes a probe with an absolute, clean path or refuses
// materialize_failed, without panicking; and a probe it takes is held to
// a platform, agreeing or refusing, without panicking.
func FuzzParseProbe(f *testing.F) {
	f.Add([]byte(`{"path":"/usr/bin/python3.12","version":"3.12.3","venv_version":"3.12.3","implementation":"cpython","libpython":"","glibc":"2.39","pointer_bits":64,"gil_disabled":false,"cache_tag":"cpython-312","pyc_magic":"cb0d0d0a","venv_dir":"/usr/lib/python3.12/venv","markers":{"implementation_name":"cpython","os_name":"posix","platform_machine":"x86_64","python_version":"3.12","sys_platform":"linux"}}`))
	f.Add([]byte(`{"path":"/usr/bin/python3","version":"3.13.0","markers":{"python_version":"3.13","sys_platform":"linux","platform_machine":"aarch64"},"glibc":"x.y","gil_disabled":true}`))
	f.Add([]byte(`{"path":"relative","version":"3"}`))
	f.Add([]byte(`[]`))
	var ps []*platform.Platform
	for _, n := range []string{"cp311-manylinux_2_28_x86_64", "cp310-musllinux_1_1_x86_64", "cp311-macosx_11_0_arm64", "cp311-win_amd64"} {
		p, err := platform.Lookup(n)
		if err != nil {
			f.Fatal(err)
		}
		ps = append(ps, p)
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		in, err := parseProbe("/opt/python3", out)
		if err != nil {
			if refusal.CodeOf(err) != refusal.MaterializeFailed {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, p := range ps {
			if err := in.CheckPlatform(p); err != nil && refusal.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

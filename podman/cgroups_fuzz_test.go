package podman

import (
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// FuzzReadCgroups: whatever podman info prints (another podman version,
// a wrapper script, an error on stdout), readCgroups says which limits do
// not hold or refuses container_unavailable with one line, without
// panicking; it never reports a limit it does not know.
func FuzzReadCgroups(f *testing.F) {
	for _, s := range []string{"true v2 cpu,memory,pids,\n", "true v2 cpuset,\n", "true v1 \n", "false v2 \n", "Error: x\nmore", "true", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		u, err := readCgroups(out)
		if err != nil {
			if refusal.CodeOf(err) != refusal.ContainerUnavailable {
				t.Fatalf("untyped error %v", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("not one line: %q", err)
			}
			return
		}
		for _, l := range u.limits {
			if !slices.Contains([]string{"memory", "cpus", "pids"}, l) {
				t.Fatalf("limit %q", l)
			}
		}
		if (len(u.limits) == 0) != (u.why == "") {
			t.Fatalf("%+v", u)
		}
	})
}

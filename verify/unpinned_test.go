package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestUnpinnedSaysWhatThePinHas: a backend or platform the accepted pin
// has no materialization for is refused naming those it has and what to
// give (it said only "has no accepted container materialization"), and
// several for one backend name their platforms (it said "name the
// platform" without them).
func TestUnpinnedSaysWhatThePinHas(t *testing.T) {
	spec := &registry.Provider{Materializations: []registry.Materialization{
		{Backend: registry.BackendLocal, Platform: "cp311-manylinux_2_36_x86_64"},
		{Backend: registry.BackendLocal, Platform: "cp312-manylinux_2_17_aarch64"},
	}}
	for _, tc := range []struct {
		backend, platform string
		n                 int
		code              refusal.Code
		want              []string
		remedy            refusal.Action // "" for none
	}{
		// A container materialization names its image, which only the
		// operator knows: the words say so, and no remedy proposes a
		// local one.
		{registry.BackendContainer, "", 0, refusal.PinUnapproved, []string{
			"provider acme-echo has no accepted container materialization (its pin has: local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64): name the backend and platform of one it has",
			"with a container materialization, the image built for it (REF@sha256:…; docs/operator.md)"}, ""},
		{registry.BackendLocal, "cp311-win_amd64", 0, refusal.PinUnapproved, []string{
			"no accepted local materialization for cp311-win_amd64 (its pin has: local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64)",
			"propose the provider again for cp311-win_amd64 and approve it"}, refusal.ActionPropose},
		{registry.BackendLocal, "", 2, refusal.PlatformUnsupported, []string{
			"provider acme-echo has 2 local materializations (local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64); name the platform of one"}, ""},
	} {
		t.Run(tc.backend+" "+tc.platform, func(t *testing.T) {
			err := Unpinned(spec, "acme-echo", tc.backend, tc.platform, tc.n)
			if !errors.Is(err, tc.code) {
				t.Errorf("%s %q: %v, want %s", tc.backend, tc.platform, err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s %q: %v\nwant it to say %q", tc.backend, tc.platform, err, w)
				}
			}
			if r := refusal.RemedyOf(err); tc.remedy == "" && r != nil || tc.remedy != "" && (r == nil || r.Action != tc.remedy || r.Target != "acme-echo") {
				t.Errorf("%s %q: remedy %+v, want %q of acme-echo", tc.backend, tc.platform, r, tc.remedy)
			}
		})
	}
	// The local pick goes through it.
	if _, err := pick(spec, "acme-echo", ""); err == nil || !strings.Contains(err.Error(), "name the platform of one") {
		t.Errorf("pick of two: %v", err)
	}
}

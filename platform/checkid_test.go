package platform

import (
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestCheckID: what can name a platform passes (host, a preset, the id a
// platform file's content or a host implies, free-threaded too); anything
// else is refused platform_unsupported with the remedy of listing the
// presets, as Lookup refuses an unknown preset.
func TestCheckID(t *testing.T) {
	for _, id := range []string{"host", "cp312-manylinux_2_17_aarch64", "cp311-win_amd64", "cp313t-manylinux_2_39_x86_64", "cp311-linux_x86_64", "cp314-any"} {
		if err := CheckID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"garbage", "Host", "cp2-linux_x86_64", "cp312", "cp312-", "cp312-linux x86_64", "cp312-manylinux.x86_64", "py3-none-any", "cp03-win32", "../cp312-win32"} {
		err := CheckID(id)
		if refusal.CodeOf(err) != refusal.PlatformUnsupported {
			t.Errorf("%q: %v, want platform_unsupported", id, err)
			continue
		}
		if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionPlatformList {
			t.Errorf("%q: remedy %+v, want platform_list", id, r)
		}
	}
	// Every preset is one.
	for _, id := range Presets() {
		if err := CheckID(id); err != nil {
			t.Errorf("preset %q: %v", id, err)
		}
	}
}

package platform

import (
	"encoding/json"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// FuzzLookup: any --platform NAME is a preset whose id is that name, or a
// platform_unsupported refusal, without panicking; a preset's JSON reads
// back as the same platform.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"cp312-manylinux_2_39_x86_64", "cp310-musllinux_1_1_x86_64", "cp311-macosx_11_0_arm64", "cp311-win_amd64", "cp312-manylinux_2_3000000_x86_64", "cp3-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, err := Lookup(name)
		if err != nil {
			if refusal.CodeOf(err) != refusal.PlatformUnsupported {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if p.ID() != name || len(p.Tags) == 0 || len(p.Tags) > 100000 {
			t.Fatalf("%q: id %q, %d tags", name, p.ID(), len(p.Tags))
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if q, err := ParseJSON(b); err != nil || q.ID() != name || len(q.Tags) != len(p.Tags) {
			t.Fatalf("%q does not round-trip: %v", name, err)
		}
	})
}

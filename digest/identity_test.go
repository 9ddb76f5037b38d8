package digest

import (
	"strings"
	"testing"
)

// TestResolutionDigestIgnoresURLAndSize: the resolution digest hashes
// each package's name, version, file name and sha256, never where the
// lock says the wheel is nor its size (DESIGN §5: a mirror move does not
// change identity). The known-answer vectors carry neither field, so a
// digest that hashed them still reproduced every vector.
func TestResolutionDigestIgnoresURLAndSize(t *testing.T) {
	a := ResolvedWheel{Name: "alpha", Version: "1", Filename: "alpha-1-py3-none-any.whl", SHA256: dA}
	b := ResolvedWheel{Name: "beta", Version: "2", Filename: "beta-2-py3-none-any.whl", SHA256: dB}
	base, err := ResolutionDigest([]ResolvedWheel{a, b})
	if err != nil {
		t.Fatal(err)
	}
	moved := []ResolvedWheel{a, b}
	moved[0].URL, moved[0].Size = "https://mirror.example/alpha-1-py3-none-any.whl", 1234
	moved[1].URL, moved[1].Size = "https://files.example/b/beta-2-py3-none-any.whl", 99
	if got, err := ResolutionDigest(moved); err != nil || got != base {
		t.Errorf("URLs and sizes changed the resolution digest: %s, %v; want %s", got, err, base)
	}
	j, err := resolutionJSON(moved)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(j); strings.Contains(s, "mirror.example") || strings.Contains(s, "1234") || strings.Contains(s, `"url"`) || strings.Contains(s, `"size"`) {
		t.Errorf("the hashed document carries a URL or size: %s", s)
	}
	// Each hashed field does change it.
	for _, edit := range []func(*ResolvedWheel){
		func(w *ResolvedWheel) { w.Name = "alpha2" },
		func(w *ResolvedWheel) { w.Version = "1.0.1" },
		func(w *ResolvedWheel) { w.Filename = "alpha-1-py3-none-manylinux_2_17_x86_64.whl" },
		func(w *ResolvedWheel) { w.SHA256 = dB },
	} {
		c := a
		edit(&c)
		if got, err := ResolutionDigest([]ResolvedWheel{c, b}); err != nil || got == base {
			t.Errorf("an edit of %+v left the resolution digest %s (%v)", c, got, err)
		}
	}
}

// TestParseLowercaseOnly: a digest is "sha256:" and 64 lowercase hex
// digits (DESIGN §5); an uppercase spelling of the same value is refused,
// not taken as another digest (== compares the spelling). FuzzParse's
// seed has an uppercase digest but asserts only the round trip, which an
// uppercase digest accepted also passes.
func TestParseLowercaseOnly(t *testing.T) {
	lower := Sum([]byte("x")).String()
	for _, s := range []string{strings.ToUpper(lower), "sha256:" + strings.ToUpper(lower[len(Prefix):]), "SHA256:" + lower[len(Prefix):], lower + " ", lower[:len(lower)-1]} {
		if d, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %s, want an error", s, d)
		}
		var d Digest
		if err := d.UnmarshalText([]byte(s)); err == nil {
			t.Errorf("UnmarshalText(%q) = %s, want an error", s, d)
		}
	}
	if d, err := Parse(lower); err != nil || d.String() != lower {
		t.Fatalf("Parse(%q) = %s, %v", lower, d, err)
	}
}

package digest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cruxible/cruxprov/canonical"
)

func mustDigest(s string) Digest {
	d, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return d
}

var (
	dA = Sum([]byte("a"))
	dB = Sum([]byte("b"))
)

func TestTypedDigestsRefuseBadInput(t *testing.T) {
	okPkg := ResolvedWheel{Name: "certifi", Version: "2024.8.30", Filename: "certifi-2024.8.30-py3-none-any.whl", SHA256: dA}
	interp := Interpreter{"/usr/bin/python3.11", "3.11.2"}
	for _, c := range []struct {
		name  string
		field string
		err   error
	}{
		{"implementation empty id", "interface.id", second(ImplementationDigest("", dA, "e", "m:a", dB))},
		{"implementation zero interface digest", "interface.digest", second(ImplementationDigest("i", Digest{}, "e", "m:a", dB))},
		{"implementation empty entrypoint", "entrypoint.name", second(ImplementationDigest("i", dA, "", "m:a", dB))},
		{"implementation empty object", "entrypoint.object", second(ImplementationDigest("i", dA, "e", "", dB))},
		{"implementation non-UTF-8 entrypoint", "entrypoint.name", second(ImplementationDigest("i", dA, "e\xff", "m:a", dB))},
		{"local non-UTF-8 platform", "platform", second(LocalMaterializationDigest("p\xff", interp, dA, nil, ""))},
		{"implementation zero distribution", "distribution", second(ImplementationDigest("i", dA, "e", "m:a", Digest{}))},
		{"resolution empty name", "packages[1].name", second(ResolutionDigest([]ResolvedWheel{okPkg, {Name: "", Version: "1", Filename: "f.whl", SHA256: dA}}))},
		{"resolution unnormalized name", "packages[0].name", second(ResolutionDigest([]ResolvedWheel{{Name: "Foo_Bar", Version: "1", Filename: "f.whl", SHA256: dA}}))},
		{"resolution double dash", "packages[0].name", second(ResolutionDigest([]ResolvedWheel{{Name: "foo--bar", Version: "1", Filename: "f.whl", SHA256: dA}}))},
		{"resolution trailing dash", "packages[0].name", second(ResolutionDigest([]ResolvedWheel{{Name: "foo-", Version: "1", Filename: "f.whl", SHA256: dA}}))},
		{"resolution empty version", "packages[0].version", second(ResolutionDigest([]ResolvedWheel{{Name: "foo", Version: "", Filename: "f.whl", SHA256: dA}}))},
		{"resolution empty filename", "packages[0].filename", second(ResolutionDigest([]ResolvedWheel{{Name: "foo", Version: "1", Filename: "", SHA256: dA}}))},
		{"resolution zero sha", "packages[0].sha256", second(ResolutionDigest([]ResolvedWheel{{Name: "foo", Version: "1", Filename: "f.whl", SHA256: Digest{}}}))},
		{"resolution duplicate package", "packages", second(ResolutionDigest([]ResolvedWheel{okPkg, {Name: "certifi", Version: "2025.1.1", Filename: "certifi-2025.1.1-py3-none-any.whl", SHA256: dB}}))},
		{"local empty platform", "platform", second(LocalMaterializationDigest("", interp, dA, nil, ""))},
		{"local relative interpreter", "interpreter.path", second(LocalMaterializationDigest("p", Interpreter{"bin/python", "3.11.2"}, dA, nil, ""))},
		{"local unclean interpreter", "interpreter.path", second(LocalMaterializationDigest("p", Interpreter{"/usr/bin/../bin/python", "3.11.2"}, dA, nil, ""))},
		{"local empty version", "interpreter.version", second(LocalMaterializationDigest("p", Interpreter{"/usr/bin/python", ""}, dA, nil, ""))},
		{"local zero resolution", "resolution", second(LocalMaterializationDigest("p", interp, Digest{}, nil, ""))},
		{"local root name", "root.name", second(LocalMaterializationDigest("p", interp, dA, &Root{"Example", "1", dB}, ""))},
		{"local root version", "root.version", second(LocalMaterializationDigest("p", interp, dA, &Root{"example", "", dB}, ""))},
		{"local root sha", "root.sha256", second(LocalMaterializationDigest("p", interp, dA, &Root{"example", "1", Digest{}}, ""))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var fe *FieldError
			if !errors.As(c.err, &fe) || fe.Field != c.field {
				t.Errorf("%s: got %v, want a *FieldError on %s", c.name, c.err, c.field)
			}
		})
	}
	var ce *canonical.Error
	if _, err := InterfaceDigest([]byte(`{"a":1,"a":1}`)); !errors.As(err, &ce) {
		t.Errorf("InterfaceDigest of a duplicate key: %v", err)
	}
	// A noncharacter is valid UTF-8 that I-JSON cannot carry: no
	// canonical form, so a *canonical.Error (docs/digests.md, Typed digests).
	for _, c := range []struct {
		name string
		err  error
	}{
		{"implementation", second(ImplementationDigest("cruxible.x/v1\uffff", dA, "e", "m:o", dB))},
		{"resolution", second(ResolutionDigest([]ResolvedWheel{{Name: "a", Version: "1\ufdd0", Filename: "a-1-py3-none-any.whl", SHA256: dA}}))},
		{"local", second(LocalMaterializationDigest("p\U0010fffe", interp, dA, nil, ""))},
		{"local v1", second(LocalMaterializationDigestV1("p", interp, dA, &Root{"example", "1\ufffe", dB}))},
	} {
		if !errors.As(c.err, &ce) {
			t.Errorf("%s digest of a noncharacter: %v, want a *canonical.Error", c.name, c.err)
		}
	}
}

func second(_ Digest, err error) error { return err }

func TestResolutionDigestOrderIndependent(t *testing.T) {
	a := ResolvedWheel{Name: "alpha", Version: "1", Filename: "alpha-1-py3-none-any.whl", SHA256: dA}
	b := ResolvedWheel{Name: "beta", Version: "2", Filename: "beta-2-py3-none-any.whl", SHA256: dB}
	x, err := ResolutionDigest([]ResolvedWheel{a, b})
	if err != nil {
		t.Fatal(err)
	}
	in := []ResolvedWheel{b, a}
	y, err := ResolutionDigest(in)
	if err != nil {
		t.Fatal(err)
	}
	if x != y {
		t.Fatal("order changed the resolution digest")
	}
	if in[0] != b {
		t.Fatal("ResolutionDigest reordered its argument")
	}
	b.Version = "3"
	if z, _ := ResolutionDigest([]ResolvedWheel{a, b}); z == x {
		t.Fatal("a version change did not change the digest")
	}
}

func TestDomainSeparation(t *testing.T) {
	// The same strings in different typed digests never collide, and a
	// root changes the materialization digest.
	interp := Interpreter{"/usr/bin/python3.11", "3.11.2"}
	bare, _ := LocalMaterializationDigest("p", interp, dA, nil, "")
	withRoot, _ := LocalMaterializationDigest("p", interp, dA, &Root{"x", "1", dB}, "")
	other, _ := LocalMaterializationDigest("p", Interpreter{"/opt/python/bin/python3.11", "3.11.2"}, dA, nil, "")
	compiled, _ := LocalMaterializationDigest("p", interp, dA, nil, BytecodeUncheckedHash)
	v1, _ := LocalMaterializationDigestV1("p", interp, dA, nil)
	empty, _ := ResolutionDigest(nil)
	if bare == withRoot || bare == other || bare == empty || bare == compiled || bare == v1 || compiled == v1 {
		t.Fatal("distinct inputs gave one digest")
	}
	if _, err := LocalMaterializationDigest("p", interp, dA, nil, "timestamp"); err == nil {
		t.Fatal("an unknown bytecode mode was hashed")
	}
}

// The implementation digest of the known-answer vector in
// testdata/digests/implementation.json.
func ExampleImplementationDigest() {
	d, err := ImplementationDigest(
		"cruxible.example.summarize/v1",
		mustDigest("sha256:c796d37c6d491e8f0c6e9b83eed34c15c0f377f9f0f3cbb3216fbbf776da6325"),
		"summarize",
		"example_provider.summarize:Summarizer",
		mustDigest("sha256:f2e40bd921708484d61396975dcb95a39ab53d276d829a619ec9ec09452eba72"),
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(d)
	// Output: sha256:f5c462f4ce315e46930ad0de3f16ff2fa4a2f5cf049698373d6ad489ae6fbd21
}

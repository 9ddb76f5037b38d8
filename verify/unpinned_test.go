package verify

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
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
		// operator knows: the words say so, and the remedy proposes
		// one (Backend), not a local one.
		{registry.BackendContainer, "", 0, refusal.PinUnapproved, []string{
			"provider acme-echo has no accepted container materialization (its pin has: local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64): name the backend and platform of one it has",
			"with a container materialization, the image built for it (REF@sha256:…; docs/operator.md)"}, refusal.ActionPropose},
		{registry.BackendLocal, "cp311-win_amd64", 0, refusal.PinUnapproved, []string{
			"no accepted local materialization for cp311-win_amd64 (its pin has: local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64)",
			"propose the provider again for cp311-win_amd64 and approve it"}, refusal.ActionPropose},
		{registry.BackendLocal, "", 2, refusal.PlatformUnsupported, []string{
			"provider acme-echo has 2 local materializations (local cp311-manylinux_2_36_x86_64, local cp312-manylinux_2_17_aarch64); name the platform of one"}, refusal.ActionNamePlatform},
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
			r := refusal.RemedyOf(err)
			if tc.remedy == "" && r != nil || tc.remedy != "" && (r == nil || r.Action != tc.remedy) {
				t.Fatalf("%s %q: remedy %+v, want %q", tc.backend, tc.platform, r, tc.remedy)
			}
			// The proposal is of acme-echo, adding a container
			// materialization where one was asked for; the platforms
			// to name one of are the pin's for the backend asked.
			switch tc.remedy {
			case refusal.ActionPropose:
				backend := "" // local: the install proposes it as it does
				if tc.backend == registry.BackendContainer {
					backend = registry.BackendContainer
				}
				if r.Target != "acme-echo" || r.Backend != backend {
					t.Errorf("%s %q: remedy %+v, want propose acme-echo, backend %q", tc.backend, tc.platform, r, backend)
				}
			case refusal.ActionNamePlatform:
				if !slices.Equal(r.Platforms, []string{"cp311-manylinux_2_36_x86_64", "cp312-manylinux_2_17_aarch64"}) {
					t.Errorf("%s %q: remedy %+v, want the pin's two local platforms", tc.backend, tc.platform, r)
				}
			}
		})
	}
	// A container materialization for another platform: the proposal
	// keeps its image beside the one to add.
	img := "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32)
	withImage := &registry.Provider{Materializations: append(slices.Clone(spec.Materializations),
		registry.Materialization{Backend: registry.BackendContainer, Platform: "cp311-manylinux_2_36_x86_64", Image: img})}
	if r := refusal.RemedyOf(Unpinned(withImage, "acme-echo", registry.BackendContainer, "cp312-manylinux_2_17_aarch64", 0)); r == nil ||
		r.Action != refusal.ActionPropose || r.Backend != registry.BackendContainer || !slices.Equal(r.Images, []string{img}) {
		t.Errorf("container for cp312 beside an image for cp311: remedy %+v, want propose keeping %s", r, img)
	}
	// The local pick goes through it.
	if _, err := pick(spec, "acme-echo", ""); err == nil || !strings.Contains(err.Error(), "name the platform of one") {
		t.Errorf("pick of two: %v", err)
	}
}

// TestUnpinnedAdviceFilledForImagePins: the install a pin with images
// advises for a backend or platform it has no materialization for names
// the pin's platforms, the one asked, and its envs' interpreter (none
// for a pin of images alone); it named --platform PLATFORM --python
// PYTHON, though the pin and the command line knew them. Where the
// platform to add is not known (a container asked for no platform), or
// the interpreter of a local env to add (a pin of images alone), the
// operator names them.
func TestUnpinnedAdviceFilledForImagePins(t *testing.T) {
	const a, b = "cp311-manylinux_2_36_x86_64", "cp311-manylinux_2_36_aarch64"
	img := "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32)
	container := registry.Materialization{Backend: registry.BackendContainer, Platform: a, Image: img}
	images := &registry.Provider{Materializations: []registry.Materialization{{Backend: registry.BackendResolution, Platform: a}, container}}
	mixed := &registry.Provider{Materializations: []registry.Materialization{
		{Backend: registry.BackendLocal, Platform: a, Interpreter: registry.InterpreterLabel("/usr/bin/python3.11", "3.11.2", digest.FromBytes(make([]byte, 32)))}, container}}
	for _, tc := range []struct {
		name              string
		spec              *registry.Provider
		backend, platform string
		platforms         []string
		python            string
	}{
		{"images, a container for another platform", images, registry.BackendContainer, b, []string{a, b}, ""},
		{"an env and an image, a container for another platform", mixed, registry.BackendContainer, b, []string{a, b}, "/usr/bin/python3.11"},
		{"an env and an image, an env for another platform", mixed, registry.BackendLocal, b, []string{a, b}, "/usr/bin/python3.11"},
		{"images, a container for no platform", images, registry.BackendContainer, "", nil, ""},
		{"images, an env", images, registry.BackendLocal, b, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := refusal.RemedyOf(Unpinned(tc.spec, "acme-echo", tc.backend, tc.platform, 0))
			if r == nil || r.Action != refusal.ActionPropose || !slices.Equal(r.Images, []string{img}) ||
				!slices.Equal(r.Platforms, tc.platforms) || r.Python != tc.python {
				t.Errorf("remedy %+v, want propose with %s, platforms %q, python %q", r, img, tc.platforms, tc.python)
			}
		})
	}
}

// TestAdviceNamesEachInterpreter: a pin whose envs point at two
// interpreters (an install takes one --python) advised an install with
// placeholders (--platform PLATFORM --python PYTHON) though the pin knows
// each env's platform and interpreter, and a verify of it without a
// platform advised --platform PLATFORM though the pin knows its
// platforms. The proposal names the pin's platforms (and the one asked
// for) with one interpreter, another remedy after it with the other (the
// env refused's first), the detail naming each env's; the verify is
// advised once for each platform.
func TestAdviceNamesEachInterpreter(t *testing.T) {
	const a, b, win = "cp311-manylinux_2_36_x86_64", "cp312-manylinux_2_17_aarch64", "cp311-win_amd64"
	h := digest.FromBytes(make([]byte, 32))
	ma := registry.Materialization{Backend: registry.BackendLocal, Platform: a, Interpreter: registry.InterpreterLabel("/a/python3.11", "3.11.2", h)}
	mb := registry.Materialization{Backend: registry.BackendLocal, Platform: b, Interpreter: registry.InterpreterLabel("/b/python3.12", "3.12.1", h)}
	spec := &registry.Provider{Package: &registry.Package{Name: "acme-echo", Version: "1.0.0", SHA256: h}, Materializations: []registry.Materialization{ma, mb}}
	choices := func(what string, err error, platforms []string, pythons ...string) {
		t.Helper()
		r := refusal.RemedyOf(err)
		for i, py := range pythons {
			if r == nil || r.Action != refusal.ActionPropose || r.Target != spec.ProposeTarget("acme-echo") || !slices.Equal(r.Platforms, platforms) || r.Python != py {
				t.Fatalf("%s: remedy %d %+v, want the proposal on %v with %s", what, i, r, platforms, py)
			}
			r = r.Or
		}
		if r != nil {
			t.Errorf("%s: a remedy more: %+v", what, r)
		}
		if want := "the pin's envs point at 2 interpreters, " + a + " on /a/python3.11, " + b + " on /b/python3.12"; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v\nwant it to say %q", what, err, want)
		}
	}
	choices("a local env for a platform the pin has not", Unpinned(spec, "acme-echo", registry.BackendLocal, win, 0), []string{a, b, win}, "/a/python3.11", "/b/python3.12")
	choices("a container for a platform the pin has not", Unpinned(spec, "acme-echo", registry.BackendContainer, win, 0), []string{a, b, win}, "/a/python3.11", "/b/python3.12")
	choices("b's env not in this store", withPropose(refusal.New(refusal.PinMismatch, "not in this store"), "acme-echo", spec, mb), []string{a, b}, "/b/python3.12", "/a/python3.11")
	choices("a's env not in this store", withPropose(refusal.New(refusal.PinMismatch, "not in this store"), "acme-echo", spec, ma), []string{a, b}, "/a/python3.11", "/b/python3.12")

	// Two local envs, no platform named: the command again for each.
	r := refusal.RemedyOf(Unpinned(spec, "acme-echo", registry.BackendLocal, "", 2))
	if r == nil || r.Action != refusal.ActionNamePlatform || r.Target != a || !slices.Equal(r.Platforms, []string{a, b}) ||
		r.Or == nil || r.Or.Action != refusal.ActionNamePlatform || r.Or.Target != b || r.Or.Or != nil {
		t.Errorf("two local envs, no platform: remedy %+v, want name_platform %s, or %s", r, a, b)
	}
}

// TestUnpinnedResolutionOnlyNamesAnEnvsPlatform: a local env asked for a
// platform the pin holds the resolution of alone (its interpreter does
// not run that platform: install proposed no env there) is refused
// naming the platforms of the envs it has. It advised proposing the
// provider again with the pin's platforms and interpreter, which
// proposed the same pin: "it changes nothing … reject it".
func TestUnpinnedResolutionOnlyNamesAnEnvsPlatform(t *testing.T) {
	const host, arm = "cp311-manylinux_2_36_x86_64", "cp312-manylinux_2_17_aarch64"
	spec := &registry.Provider{Materializations: []registry.Materialization{
		{Backend: registry.BackendLocal, Platform: host, Interpreter: registry.InterpreterLabel("/usr/bin/python3.11", "3.11.2", digest.FromBytes(make([]byte, 32)))},
		{Backend: registry.BackendResolution, Platform: arm},
	}}
	err := Unpinned(spec, "acme-native", registry.BackendLocal, arm, 0)
	if !errors.Is(err, refusal.PinUnapproved) || !strings.Contains(err.Error(), "its pin holds the resolution of "+arm+" alone") ||
		!strings.Contains(err.Error(), "name the platform of an env it has") {
		t.Fatalf("%v", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNamePlatform || r.Target != host || !slices.Equal(r.Platforms, []string{host}) {
		t.Fatalf("remedy %+v, want name_platform %s", r, host)
	}
	// A platform the pin has nothing of is still proposed.
	if r := refusal.RemedyOf(Unpinned(spec, "acme-native", registry.BackendLocal, "cp311-win_amd64", 0)); r == nil || r.Action != refusal.ActionPropose {
		t.Fatalf("another platform: remedy %+v, want propose", r)
	}
}

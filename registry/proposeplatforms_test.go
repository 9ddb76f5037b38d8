package registry_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestProposePlatforms: what a propose remedy names for an install to
// propose a pin's envs again: the platforms the pin names (its envs' and
// its resolutions', once each, in its order) and the interpreter path its
// envs point at (a path with spaces kept whole), or, for a pin of images
// and no env, its platforms and no interpreter; nothing where an install
// of one --python could not (envs of two interpreters), or where the pin
// pins neither an env nor an image.
func TestProposePlatforms(t *testing.T) {
	local := func(platform, interp string) registry.Materialization {
		return registry.Materialization{Backend: registry.BackendLocal, Platform: platform, Interpreter: interp}
	}
	res := func(platform string) registry.Materialization {
		return registry.Materialization{Backend: registry.BackendResolution, Platform: platform}
	}
	for _, c := range []struct {
		name      string
		ms        []registry.Materialization
		platforms []string
		python    string
	}{
		{"one env", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "/usr/bin/python3.11 3.11.2 sha256:a83c0370d915")}, []string{"cp311-manylinux_2_36_x86_64"}, "/usr/bin/python3.11"},
		{"a path with spaces, an identity without a hash", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "/opt/my py/python3.11 3.11.2")}, []string{"cp311-manylinux_2_36_x86_64"}, "/opt/my py/python3.11"},
		{"an env and a resolution", []registry.Materialization{res("cp312-manylinux_2_17_aarch64"), local("cp311-manylinux_2_36_x86_64", "/p/python3.11 3.11.2 sha256:a83c0370d915")}, []string{"cp312-manylinux_2_17_aarch64", "cp311-manylinux_2_36_x86_64"}, "/p/python3.11"},
		{"envs of two interpreters", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "/a/python3.11 3.11.2 sha256:a83c0370d915"), local("cp312-manylinux_2_36_x86_64", "/b/python3.12 3.12.1 sha256:0123456789ab")}, nil, ""},
		// A pin with images: its platforms all the same (the install
		// is given its images too, Images), and the interpreter of its
		// envs; none where it has no env. It gave nothing, and the
		// install advised named placeholders the pin knew.
		{"an env and an image", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "/p/python3.11 3.11.2 sha256:a83c0370d915"), {Backend: registry.BackendContainer, Platform: "cp311-manylinux_2_36_x86_64", Image: "r/e@sha256:00"}}, []string{"cp311-manylinux_2_36_x86_64"}, "/p/python3.11"},
		{"images alone", []registry.Materialization{res("cp311-manylinux_2_36_x86_64"), {Backend: registry.BackendContainer, Platform: "cp311-manylinux_2_36_x86_64", Image: "r/e@sha256:00"},
			res("cp311-manylinux_2_36_aarch64"), {Backend: registry.BackendContainer, Platform: "cp311-manylinux_2_36_aarch64", Image: "r/e@sha256:01"}}, []string{"cp311-manylinux_2_36_x86_64", "cp311-manylinux_2_36_aarch64"}, ""},
		{"an image and envs of two interpreters", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "/a/python3.11 3.11.2 sha256:a83c0370d915"), local("cp312-manylinux_2_36_x86_64", "/b/python3.12 3.12.1 sha256:0123456789ab"), {Backend: registry.BackendContainer, Platform: "cp311-manylinux_2_36_x86_64", Image: "r/e@sha256:00"}}, nil, ""},
		{"resolutions alone", []registry.Materialization{res("cp312-win_amd64")}, nil, ""},
		{"the identity install writes (InterpreterLabel)", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", registry.InterpreterLabel("/opt/my py/python3.11", "3.11.2", digest.FromBytes(make([]byte, 32))))}, []string{"cp311-manylinux_2_36_x86_64"}, "/opt/my py/python3.11"},
		{"no interpreter recorded", []registry.Materialization{local("cp311-manylinux_2_36_x86_64", "")}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &registry.Provider{Name: "acme-echo", Materializations: c.ms}
			platforms, python := p.ProposePlatforms()
			if !slices.Equal(platforms, c.platforms) || python != c.python {
				t.Errorf("ProposePlatforms() = %q, %q; want %q, %q", platforms, python, c.platforms, c.python)
			}
		})
	}
	if platforms, python := (*registry.Provider)(nil).ProposePlatforms(); platforms != nil || python != "" {
		t.Errorf("a nil provider: %q, %q", platforms, python)
	}
}

// TestProposeChoices: a proposal of a pin whose envs point at two
// interpreters (ProposePlatforms gives neither platforms nor one) names
// the pin's platforms with the interpreter preferred, then another with
// the other, before the remedies it had, and its detail names each env's
// platform and interpreter; a pin of one interpreter, or a remedy that
// proposes nothing, is left as it is.
func TestProposeChoices(t *testing.T) {
	local := func(platform, interp string) registry.Materialization {
		return registry.Materialization{Backend: registry.BackendLocal, Platform: platform, Interpreter: interp}
	}
	two := &registry.Provider{Name: "acme-echo", Materializations: []registry.Materialization{
		local("cp311-manylinux_2_36_x86_64", "/a/python3.11 3.11.2 sha256:a83c0370d915"),
		{Backend: registry.BackendResolution, Platform: "cp312-win_amd64"},
		local("cp312-manylinux_2_36_x86_64", "/b/python3.12 3.12.1 sha256:0123456789ab")}}
	plats := []string{"cp311-manylinux_2_36_x86_64", "cp312-win_amd64", "cp312-manylinux_2_36_x86_64"}
	e := refusal.New(refusal.PinUnapproved, "proposed again").WithRemedy(refusal.ActionPropose, "acme-echo").WithImages([]string{"r/e@sha256:00"}).WithProposeNoBytecode(true).OrRemedy(refusal.ActionRetire, "acme-echo")
	two.WithProposeChoices(e, nil, "/b/python3.12")
	r := e.Remedy
	if r.Python != "/b/python3.12" || !slices.Equal(r.Platforms, plats) || r.Or == nil || r.Or.Python != "/a/python3.11" || !slices.Equal(r.Or.Platforms, plats) ||
		r.Or.Action != refusal.ActionPropose || !r.Or.NoBytecode || !slices.Equal(r.Or.Images, r.Images) || r.Or.Or == nil || r.Or.Or.Action != refusal.ActionRetire {
		t.Errorf("two interpreters: %+v then %+v", r, r.Or)
	}
	if want := "proposed again (the pin's envs point at 2 interpreters, cp311-manylinux_2_36_x86_64 on /a/python3.11, cp312-manylinux_2_36_x86_64 on /b/python3.12;"; !strings.HasPrefix(e.Detail, want) {
		t.Errorf("detail %q, want %q…", e.Detail, want)
	}
	one := &registry.Provider{Name: "acme-echo", Materializations: two.Materializations[:2]}
	e = refusal.New(refusal.PinUnapproved, "proposed again").WithRemedy(refusal.ActionPropose, "acme-echo")
	if one.WithProposeChoices(e, nil, ""); e.Remedy.Or != nil || e.Remedy.Python != "" || e.Detail != "proposed again" {
		t.Errorf("one interpreter: %+v %q", e.Remedy, e.Detail)
	}
	e = refusal.New(refusal.PinUnapproved, "retire it").WithRemedy(refusal.ActionRetire, "acme-echo")
	if two.WithProposeChoices(e, nil, ""); e.Remedy.Or != nil || e.Detail != "retire it" {
		t.Errorf("another remedy: %+v %q", e.Remedy, e.Detail)
	}
}

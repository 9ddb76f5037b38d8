package main

import (
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
)

// TestAdviceForEnvsOfTwoInterpreters: the advice of a pin whose envs
// point at two interpreters renders commands to copy: the install once
// with each interpreter, the pin's platforms named (it rendered
// --platform PLATFORM --python PYTHON), and the verify without a platform
// once for each platform the pin has (it rendered --platform PLATFORM).
func TestAdviceForEnvsOfTwoInterpreters(t *testing.T) {
	const a, b, win = "cp311-manylinux_2_36_x86_64", "cp312-manylinux_2_17_aarch64", "cp311-win_amd64"
	h := digest.FromBytes(make([]byte, 32))
	spec := &registry.Provider{Package: &registry.Package{Name: "acme-echo", Version: "1.0.0", SHA256: h}, Materializations: []registry.Materialization{
		{Backend: registry.BackendLocal, Platform: a, Interpreter: registry.InterpreterLabel("/a/python3.11", "3.11.2", h)},
		{Backend: registry.BackendLocal, Platform: b, Interpreter: registry.InterpreterLabel("/b/python3.12", "3.12.1", h)},
	}}
	args := []string{"cruxprov", "--home", "/h", "verify", "acme-echo", "--platform", win}
	_, cmdline, or := renderRemedies(refusal.RemedyOf(verify.Unpinned(spec, "acme-echo", registry.BackendLocal, win, 0)), args)
	install := "cruxprov install acme-echo==1.0.0 --sha256 " + h.Hex() + " --platform " + a + "," + b + "," + win + " --python "
	if want := install + "/a/python3.11"; !strings.HasPrefix(cmdline, want) {
		t.Errorf("the install advised: %q, want %q", cmdline, want)
	}
	if want := "; or: " + install + "/b/python3.12"; !strings.HasPrefix(or, want) {
		t.Errorf("the other install advised: %q, want %q", or, want)
	}
	args = []string{"cruxprov", "--home", "/h", "verify", "acme-echo"}
	_, cmdline, or = renderRemedies(refusal.RemedyOf(verify.Unpinned(spec, "acme-echo", registry.BackendLocal, "", 2)), args)
	if want := "cruxprov --home /h verify acme-echo --platform " + a; cmdline != want {
		t.Errorf("the verify advised: %q, want %q", cmdline, want)
	}
	if want := "; or: cruxprov --home /h verify acme-echo --platform " + b; or != want {
		t.Errorf("the other verify advised: %q, want %q", or, want)
	}
}

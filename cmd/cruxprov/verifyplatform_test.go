package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestVerifyPlatformThatCannotBeOne: verify and run of an approved
// provider with a --platform that is no platform ("garbage") are refused
// platform_unsupported, as lock resolve --platform garbage is, advising
// the list of presets, which runs; they were refused pin_unapproved,
// advising to propose the provider again "for garbage". The container
// backend too. A preset the pin has no env for stays pin_unapproved,
// naming what the pin has.
func TestVerifyPlatformThatCannotBeOne(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	run, _, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	follow := adviceFollower(t, base, nil)
	for _, args := range [][]string{
		{"verify", "acme-echo", "--platform", "garbage"},
		{"verify", "acme-echo", "--backend", "container", "--platform", "garbage"},
		{"run", "acme-echo", "echo", "--input", in, "--platform", "garbage"},
		{"run", "acme-echo", "echo", "--input", in, "--backend", "container", "--platform", "garbage"},
	} {
		r := run(args...)
		if !strings.Contains(r.stderr, `no platform "garbage"`) || strings.Contains(r.stderr, "propose") {
			t.Errorf("%v: %+v", args, r)
		}
		f := follow(strings.Join(args, " "), r, refusal.PlatformUnsupported, "cruxprov platform list")
		if !strings.Contains(f.stdout, "cp312-manylinux_2_17_aarch64") {
			t.Errorf("%v: platform list lists no preset: %+v", args, f)
		}
	}
	r := run("verify", "acme-echo", "--platform", "cp312-manylinux_2_17_aarch64")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinUnapproved)+": provider acme-echo has no accepted local materialization for cp312-manylinux_2_17_aarch64 (its pin has: local cp311-") {
		t.Errorf("a preset the pin has no env for: %+v", r)
	}
}

package main

import (
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestImageBuildRemedyKeepsEpoch: an image build's fix line is the
// build again under the SOURCE_DATE_EPOCH it ran under. ci.md's job runs
// `SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) cruxprov image build …
// --push …`, and a push to a registry under a private CA advised the
// build again with --ca-bundle FILE but no epoch: run verbatim in a
// shell without the CI's variable, it built and pushed an image of epoch
// 0, another digest than the job's and its other runners'. Other
// commands, and a build without the variable, are rendered as before.
func TestImageBuildRemedyKeepsEpoch(t *testing.T) {
	build := []string{"cruxprov", "image", "build", "--wheel", "dist/acme_echo-1.0.0-py3-none-any.whl", "--index", "http://127.0.0.1:8080/simple/",
		"--platform", "cp311-manylinux_2_36_x86_64", "--base", "registry.example/debian@sha256:aa", "--shim", "bin/cruxshim",
		"--push", "registry.example/acme/echo", "--sign-key", "builder.key", "--json"}
	rest := " --wheel dist/acme_echo-1.0.0-py3-none-any.whl --index http://127.0.0.1:8080/simple/ --platform cp311-manylinux_2_36_x86_64" +
		" --base registry.example/debian@sha256:aa --shim bin/cruxshim --push registry.example/acme/echo --sign-key builder.key"
	ca := &refusal.Remedy{Action: refusal.ActionCABundle}
	verify := []string{"cruxprov", "image", "verify", "registry.example/acme/echo@sha256:aa", "--key", "builder.pub"}
	for _, tc := range []struct {
		epoch string
		rem   *refusal.Remedy
		args  []string
		want  string
	}{
		{"1700000000", ca, build, "SOURCE_DATE_EPOCH=1700000000 cruxprov image build" + rest + " --ca-bundle FILE"},
		{"1700000000", &refusal.Remedy{Action: refusal.ActionNoCache}, build, "SOURCE_DATE_EPOCH=1700000000 cruxprov image build" + rest + " --no-cache"},
		{"1700000000", &refusal.Remedy{Action: refusal.ActionNameNetrc}, build, "NETRC=FILE SOURCE_DATE_EPOCH=1700000000 cruxprov image build" + rest},
		{"", ca, build, "cruxprov image build" + rest + " --ca-bundle FILE"},
		{"1700000000", ca, verify, "cruxprov image verify registry.example/acme/echo@sha256:aa --key builder.pub --ca-bundle FILE"},
		{"1700000000", &refusal.Remedy{Action: refusal.ActionPlatformList}, build, "cruxprov platform list"},
	} {
		t.Setenv("SOURCE_DATE_EPOCH", tc.epoch)
		if got := renderRemedy(tc.rem, tc.args); got != tc.want {
			t.Errorf("SOURCE_DATE_EPOCH=%q %s %v:\n got %q\nwant %q", tc.epoch, tc.rem.Action, tc.args[1:3], got, tc.want)
		}
	}
}

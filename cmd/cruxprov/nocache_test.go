package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestRunAgainRemediesNameTheirFlag: a refusal whose remedy is the same
// command again with --no-cache or --no-compile names a flag every
// command that builds an env has. install had no --no-cache, so the
// unpacked-wheel cache's materialize_failed advised "cruxprov install …
// --no-cache", a usage error, and an install short of space could not
// leave the caches out as operator.md and store.md say a create can.
func TestRunAgainRemediesNameTheirFlag(t *testing.T) {
	flags := map[string]map[string]bool{}
	for _, c := range newApp(&bytes.Buffer{}, &bytes.Buffer{}).Commands {
		for _, cc := range append([]*cli.Command{c}, c.Subcommands...) {
			name := c.Name
			if cc != c {
				name += " " + cc.Name
			}
			flags[name] = map[string]bool{}
			for _, f := range cc.Flags {
				for _, n := range f.Names() {
					flags[name][n] = true
				}
			}
		}
	}
	// The commands that run the pipeline's materialize step.
	for _, cmd := range []string{"env create", "install", "image build"} {
		for action, flag := range map[refusal.Action]string{refusal.ActionNoCache: "no-cache", refusal.ActionNoBytecode: "no-compile"} {
			args := append([]string{"cruxprov"}, strings.Fields(cmd)...)
			if got := renderRemedy(&refusal.Remedy{Action: action}, append(args, "W")); !strings.HasSuffix(got, " --"+flag) {
				t.Errorf("%s's %s remedy renders %q", cmd, action, got)
			}
			if !flags[cmd][flag] {
				t.Errorf("%s's %s remedy adds --%s, which %s has not", cmd, action, flag, cmd)
			}
		}
	}
}

// TestInstallNoCache: install --no-cache builds and proposes the env
// without writing the store's caches, as env create --no-cache does.
func TestInstallNoCache(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	for _, id := range []string{"acme.echo", "acme.diagnostics"} {
		if r := run("interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json")); r.code != 0 {
			t.Fatalf("%+v", r)
		}
	}
	if r := run("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-cache"); r.code != 0 || !strings.Contains(r.stdout, "proposed change-set") {
		t.Fatalf("install --no-cache: %+v", r)
	}
	for _, d := range []string{"cache/unpacked-v1", "cache/pyc"} {
		if ents, _ := os.ReadDir(filepath.Join(home, d)); len(ents) != 0 {
			t.Errorf("install --no-cache wrote %s: %v", d, ents)
		}
	}
}

// TestInstallAgainChangesNothing: install run again on an accepted pin
// with nothing changed proposes an update that changes nothing, and both
// install and changeset diff say what approving it is for; the diff said
// only "Plan: 0 changes.". The diff of a change-set approved or rejected
// says so (it said "revision 2 → 2" of the accepted pin's own).
func TestInstallAgainChangesNothing(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	_, must, approveInstall := approvingStore(t, w, base, "/usr/bin/python3.11")
	approveInstall()
	r := must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile")
	if !strings.Contains(r.stdout, "it changes nothing in acme-echo's accepted pin (revision 1): approving it only approves the accepted pin again") {
		t.Errorf("install again: %+v", r)
	}
	id := strings.Fields(strings.SplitAfter(r.stdout, "proposed change-set ")[1])[0]
	if r := must("changeset", "diff", id); !strings.Contains(r.stdout, "  nothing changes: approving it only approves the accepted pin again") || !strings.HasSuffix(r.stdout, "Plan: 0 changes.\n") {
		t.Errorf("changeset diff: %+v", r)
	}
	// Once approved, its diff says it is decided, and no longer what
	// approving it is for ("revision 1 → 1", the note as if open).
	if r := must("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key")); !strings.Contains(r.stdout, "accepted") {
		t.Fatalf("approve: %+v", r)
	}
	if r := must("changeset", "diff", id); !strings.Contains(r.stdout, "(approved, not open): update acme-echo at revision 2, against what is current now (revision 2)") || strings.Contains(r.stdout, "approving it") {
		t.Errorf("changeset diff of an approved change-set: %+v", r)
	}
	// A first install says nothing of the kind.
	if r := must("install", w.echo2, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile"); strings.Contains(r.stdout, "changes nothing") {
		t.Errorf("an upgrade: %+v", r)
	}
}

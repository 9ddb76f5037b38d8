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

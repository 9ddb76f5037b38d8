package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestSealLostRebuild: an env whose seal is lost. `env create --replace
// ENV` cannot read what to rebuild from it and is refused seal_missing
// (as env verify refuses it) with the command that names the inputs; it
// exited 1 with a bare "has no seal to rebuild it from". The rebuild
// docs/operator.md §5 gives then works as written, offline from the
// store (it lacked --offline and exited 64 "--index URL is required"),
// and with --index URL instead, rebuilding the env under its digest.
func TestSealLostRebuild(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx, idx := fixtureindex.Serve(t, t.TempDir())
	home := testdir.New(t)
	out := createJSON(t, "--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", idx, "--json")
	sealFile := out.Path + ".seal.json"

	// The documented command, its placeholders filled in.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, l := range strings.Split(string(doc), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "cruxprov env create --replace --wheel ") {
			documented = strings.Fields(strings.NewReplacer("WHEEL", fx.Echo.Path, "PLATFORM", "host", "PYTHON", envPython).Replace(l))[1:]
		}
	}
	if documented == nil {
		t.Fatal("docs/operator.md gives no `cruxprov env create --replace --wheel …` command")
	}

	for _, c := range []struct {
		name string
		args []string
	}{
		{"as documented", documented},
		{"with --index instead of --offline", append(slicesWithout(documented, "--offline"), "--index", idx)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.Remove(sealFile); err != nil {
				t.Fatal(err)
			}
			for _, extra := range [][]string{nil, {"--offline"}, {"--index", idx}} {
				args := append([]string{"--home", home, "env", "create", "--replace", out.Path}, extra...)
				r := cruxprov(t, args...)
				if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.SealMissing)+": ") ||
					!strings.Contains(r.stderr, "has no seal") ||
					!strings.Contains(r.stderr, "to fix: cruxprov env create --replace --wheel WHEEL --platform PLATFORM --python PYTHON") {
					t.Fatalf("%v: %+v", extra, r)
				}
			}
			r := cruxprov(t, "--home", home, "env", "create", "--replace", out.Path, "--json", "--offline")
			var doc struct {
				Refused struct {
					Code   string
					Remedy struct{ Action, Command string }
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Code != string(refusal.SealMissing) || doc.Refused.Remedy.Action != string(refusal.ActionRebuildEnv) {
				t.Fatalf("--json: %v %+v", err, r)
			}
			// env verify names no store and loaded no config: its advice
			// still names the env's store, and leaves --index out where
			// the store's config.yaml gives it (it said --index URL).
			cfg := filepath.Join(home, "config.yaml")
			os.WriteFile(cfg, []byte("format: cruxprov.config/v1\nindex: "+idx+"\n"), 0o644)
			r = cruxprov(t, "env", "verify", out.Path)
			os.Remove(cfg)
			if r.code != exitRefused || !strings.Contains(r.stderr, "to fix: cruxprov env create --replace --wheel WHEEL --platform PLATFORM --python PYTHON --home "+home+"\n") {
				t.Errorf("env verify of an env without its seal, the index in config.yaml: %+v", r)
			}
			r = cruxprov(t, append(append([]string{"--home", home}, c.args...), "--json")...)
			var got envCreated
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
				t.Fatalf("%v: %+v", c.args, r)
			}
			if got.Digest != out.Digest || got.Path != out.Path || !got.Replaced {
				t.Errorf("rebuilt %+v, want %s replaced", got, out.Digest)
			}
			if r := cruxprov(t, "--home", home, "env", "verify", out.Path, "--deep"); r.code != 0 {
				t.Errorf("verify after the rebuild: %+v", r)
			}
		})
	}

	// Tree and seal both gone: the same refusal, saying so.
	r := cruxprov(t, "--home", home, "env", "remove", out.Path)
	if r.code != 0 {
		t.Fatalf("env remove: %+v", r)
	}
	r = cruxprov(t, "--home", home, "env", "create", "--replace", out.Path, "--offline")
	if r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.SealMissing)) || !strings.Contains(r.stderr, "directory is gone too") {
		t.Errorf("--replace of a removed env: %+v", r)
	}
}

// slicesWithout is s without any element equal to drop.
func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
)

// TestSealLocationPinnedV2EnvReplaced: an env pinned while its seal was
// v2 (written before env.location), rebuilt by `env create --replace`
// (which writes a v2.1 seal recording its path), keeps the seal content
// digest its pin records: the pin verifies, no pin_mismatch, no new
// approval. The location and the format's minor are not in the content
// digest (docs/digests.md).
func TestSealLocationPinnedV2EnvReplaced(t *testing.T) {
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs " + python)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	state := filepath.Join(base, "state")
	os.MkdirAll(filepath.Join(base, "keys"), 0o700)
	run := func(what string, want int, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+state)
		r := runCmd(t, cmd)
		if r.code != want {
			t.Fatalf("%s: want exit %d: %+v", what, want, r)
		}
		return r
	}
	run("register acme.echo", 0, "interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json"))
	run("register acme.diagnostics", 0, "interface", "register", "acme.diagnostics", "--schema", filepath.Join(w.schemas, "acme.diagnostics.json"))
	env := createdOf(t, run("env create", 0, "env", "create", "--wheel", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json"))

	// The seal as cruxprov wrote it before v2.1: format v2, no location.
	sp := seal.SealPath(env.Path)
	b, err := os.ReadFile(sp)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m["format"] != seal.Format || m["env"].(map[string]any)["location"] != env.Path {
		t.Fatalf("a new seal: format %v, env.location %v; want %s and %s", m["format"], m["env"].(map[string]any)["location"], seal.Format, env.Path)
	}
	m["format"] = seal.FormatV2
	delete(m["env"].(map[string]any), "location")
	old, _ := json.MarshalIndent(m, "", "  ")
	os.Chmod(sp, 0o644)
	if err := os.WriteFile(sp, append(old, '\n'), 0o444); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sp, 0o444)
	before := createdOf(t, run("env verify of the v2 seal", 0, "env", "verify", env.Path, "--json"))

	// Pinned with that seal: install reuses the env.
	r := run("install", 0, "install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json")
	var inst struct {
		ChangeSet struct {
			Metadata struct{ ID string } `json:"metadata"`
		} `json:"changeSet"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil || inst.ChangeSet.Metadata.ID == "" {
		t.Fatalf("install: %v %s", err, r.stdout)
	}
	keys := filepath.Join(base, "keys")
	run("key generate", 0, "key", "generate", "--out", filepath.Join(keys, "alice"))
	run("key trust", 0, "key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice")
	run("approve", 0, "changeset", "approve", inst.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "alice.key"))
	run("verify the pin", 0, "verify", "acme-echo", "--deep")

	after := createdOf(t, run("env create --replace", 0, "env", "create", "--replace", env.Path, "--offline", "--json"))
	if after.Path != env.Path || after.ContentDigest != before.ContentDigest {
		t.Fatalf("--replace of a v2-sealed env: %s content digest %s, was %s at %s", after.Path, after.ContentDigest, before.ContentDigest, env.Path)
	}
	s, err := seal.Load(env.Path)
	if err != nil || s.Format != seal.Format || s.Env.Location != env.Path {
		t.Fatalf("the rebuilt seal: %v, want format %s recording %s (not the staging path)", err, seal.Format, env.Path)
	}
	if r := run("verify the pin after --replace", 0, "verify", "acme-echo", "--deep"); strings.Contains(r.stderr, string(refusal.PinMismatch)) {
		t.Fatalf("verify after --replace: %+v", r)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/refusal"
)

// leafCommands is every command path the app runs (a group too: "env"
// alone answers), as TestHelpIsHonest walks them.
func leafCommands() [][]string {
	app := newApp(io.Discard, io.Discard)
	var paths [][]string
	var walk func(prefix []string, cs []*cli.Command)
	walk = func(prefix []string, cs []*cli.Command) {
		for _, c := range cs {
			p := append(append([]string{}, prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	return paths
}

// TestEveryCommandAnswersInItsForm holds every command to DESIGN §2 and
// §13 as a script meets it, with no arguments and with one it cannot
// use, on a --home that names nothing: the exit code is 0, 1, 64 or 78;
// with --json (given after the command), stdout is one JSON document and
// nothing else, carrying "schema": "cruxprov.<command>/v1" (schemaName),
// a refusal as {"refused": {"code", "detail"}} with a known code, any
// other failure as {"error": {"kind", "message"}}; stderr is one line,
// "refused: <code>: …", "usage: …" or "error: …"; and a usage error
// changes nothing: it made the store at the --home it was given (a
// mistyped one), so that the read-only commands there found a store.
func TestEveryCommandAnswersInItsForm(t *testing.T) {
	kinds := map[int]string{exitUsage: "usage", exitFailure: "failure"}
	prefix := map[int]string{exitRefused: "refused: ", exitUsage: "usage: ", exitFailure: "error: "}
	for _, p := range leafCommands() {
		for _, extra := range [][]string{nil, {"x"}} {
			args := append(append(append([]string{}, p...), extra...), "--json")
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				dir := t.TempDir()
				home := filepath.Join(dir, "home")
				cmd := exec.Command(bin, args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state"), "CRUXPROV_HOME=" + home}
				r := runCmd(t, cmd)
				if _, ok := prefix[r.code]; !ok && r.code != exitOK {
					t.Fatalf("exit %d, not one of 0, 1, 64, 78: %+v", r.code, r)
				}
				dec := json.NewDecoder(strings.NewReader(r.stdout))
				var doc map[string]any
				if err := dec.Decode(&doc); err != nil {
					t.Fatalf("stdout is not a JSON document: %v: %q", err, r.stdout)
				}
				if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) != 0 || dec.More() {
					t.Errorf("stdout holds more than the document: %q", r.stdout)
				}
				if want := schemaName(p...); doc["schema"] != want {
					t.Errorf("schema %v, want %s", doc["schema"], want)
				}
				if r.code == exitOK {
					if doc["refused"] != nil || doc["error"] != nil {
						t.Errorf("exit 0 with a failure document: %s", r.stdout)
					}
					return
				}
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				if len(lines) != 1 || !strings.HasPrefix(lines[0], prefix[r.code]) {
					t.Errorf("exit %d: stderr is not one %q line: %q", r.code, prefix[r.code], r.stderr)
				}
				if r.code == exitRefused {
					ref, _ := doc["refused"].(map[string]any)
					code, _ := ref["code"].(string)
					if detail, _ := ref["detail"].(string); !refusal.Known(refusal.Code(code)) || detail == "" {
						t.Errorf("refusal document without a known code and a detail: %s", r.stdout)
					}
					if !strings.HasPrefix(lines[0], "refused: "+code+": ") {
						t.Errorf("stderr %q does not name the code %s", lines[0], code)
					}
					return
				}
				e, _ := doc["error"].(map[string]any)
				if e["kind"] != kinds[r.code] || e["message"] == "" || e["message"] == nil {
					t.Errorf("exit %d with error document %s", r.code, r.stdout)
				}
				if r.code == exitUsage {
					if _, err := os.Lstat(home); err == nil {
						t.Errorf("a usage error made the store %s: %s", home, r.stderr)
					}
				}
			})
		}
	}
}

// TestUsageErrorMakesNoStore: a command that changes the registry checks
// what was typed before it opens the registry, which makes the store
// where there is none: each of these usage errors, run at a --home that
// names nothing (a typo), made a store there.
func TestUsageErrorMakesNoStore(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "schema.json")
	os.WriteFile(notJSON, []byte("not json"), 0o644)
	key := filepath.Join(dir, "k.key")
	os.WriteFile(key, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"), 0o600)
	for _, args := range [][]string{
		{"key", "trust", filepath.Join(dir, "missing.pub")},
		{"key", "trust", notJSON},
		{"key", "trust", filepath.Join(dir, "missing.pub"), "--role", "admin"},
		{"policy", "set", "--threshold", "0"},
		{"interface", "register", "acme.echo", "--schema", notJSON},
		{"interface", "register", "acme.echo", "--schema", filepath.Join(dir, "missing.json")},
		{"changeset", "approve", "ab", "--key", key},
		{"changeset", "approve", "sha256:abcdefab", "--key", key, "--expires", "-1h"},
		{"changeset", "reject", "zzzzzzzzz", "--reason", "no"},
		{"install", filepath.Join(dir, "missing.whl"), "--platform", "host", "--index", "http://127.0.0.1:1/simple/"},
		{"install", filepath.Join(dir, "missing.whl"), "--index", "http://127.0.0.1:1/simple/"},
		{"install", filepath.Join(dir, "missing.whl"), "--platform", "host"},
		{"install", "acme-echo==1.0.0", "--platform", "host", "--index", "http://127.0.0.1:1/simple/"},
		{"install", filepath.Join(dir, "missing.whl"), "--backend", "container", "--index", "http://127.0.0.1:1/simple/"},
		{"install", filepath.Join(dir, "missing.whl"), "--backend", "podman", "--platform", "host", "--index", "http://127.0.0.1:1/simple/"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "typo")
			r := cruxprov(t, append([]string{"--home", home}, args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want a usage error: %+v", r.code, r)
			}
			if _, err := os.Lstat(home); err == nil {
				t.Errorf("a usage error made the store %s: %s", home, r.stderr)
			}
		})
	}
}

// TestInstallUsageReadsTheConfig: install's command line is checked before
// the registry is opened, and config.yaml's platforms and index count
// there as given, as applyConfig gives them after the open: install with
// neither flag in a store whose config names both goes on to its WHEEL.
func TestInstallUsageReadsTheConfig(t *testing.T) {
	home := t.TempDir()
	if r := cruxprov(t, "--home", home, "install", "missing.whl"); r.code != exitUsage || !strings.Contains(r.stderr, "--platform P[,P…] is required") {
		t.Fatalf("no config, no --platform: %+v", r)
	}
	cfg := "format: cruxprov.config/v1\nindex: http://127.0.0.1:1/simple/\nplatforms: [host]\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "--home", home, "install", filepath.Join(home, "missing.whl"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "usage: WHEEL "+filepath.Join(home, "missing.whl")+": no such file or directory") {
		t.Fatalf("config.yaml's platforms and index were not read: %+v", r)
	}
}

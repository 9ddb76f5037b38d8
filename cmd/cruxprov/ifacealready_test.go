package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterfaceRegisterAgainSaysAlready: registering the schema an id is
// registered with already (the same command run again, a spelling of the
// same JSON) says so: "already registered" on stdout, "already": true in
// --json, exit 0, and nothing is appended to the history nor
// interfaces.json rewritten. Before, it printed the first registration's
// line, as if it had just registered it (the history was not appended to
// then either). A new registration says "already": false.
func TestInterfaceRegisterAgainSaysAlready(t *testing.T) {
	home, _, run := keyedHome(t, "a")
	schema := filepath.Join(t.TempDir(), "echo.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","title":"echo"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("interface", "register", "acme.echo/v1", "--schema", schema, "--json")
	var first struct {
		ID, Digest string
		Already    *bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &first) != nil || first.Already == nil || *first.Already {
		t.Fatalf("first register: %+v", r)
	}
	if r := run("interface", "register", "acme.other/v1", "--schema", schema); r.code != 0 || strings.Contains(r.stdout, "already") {
		t.Fatalf("first register, text (another id): %+v", r)
	}
	reg := filepath.Join(home, "registry")
	logBefore, _ := os.ReadFile(filepath.Join(reg, "log.jsonl"))
	ifBefore, _ := os.Stat(filepath.Join(reg, "interfaces.json"))
	// The same JSON, spelled otherwise: its canonical form is the same.
	if err := os.WriteFile(schema, []byte("{\"title\": \"echo\",\n \"type\": \"object\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run("interface", "register", "acme.echo/v1", "--schema", schema)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "already registered acme.echo/v1 "+first.Digest+" (at ") || !strings.Contains(r.stdout, "nothing changed") {
		t.Errorf("register again: %+v", r)
	}
	r = run("interface", "register", "acme.echo/v1", "--schema", schema, "--json")
	var again struct {
		ID, Digest string
		Already    bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &again) != nil || !again.Already || again.ID != "acme.echo/v1" || again.Digest != first.Digest {
		t.Errorf("register again --json: %+v", r)
	}
	logAfter, _ := os.ReadFile(filepath.Join(reg, "log.jsonl"))
	ifAfter, _ := os.Stat(filepath.Join(reg, "interfaces.json"))
	if string(logAfter) != string(logBefore) || !ifAfter.ModTime().Equal(ifBefore.ModTime()) {
		t.Errorf("register again changed the registry: history %d → %d bytes, interfaces.json %v → %v", len(logBefore), len(logAfter), ifBefore.ModTime(), ifAfter.ModTime())
	}
}

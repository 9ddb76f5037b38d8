package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestRefusedDocumentWarnings: a refused inspect --json document had no
// "warnings" where a refused lock resolve --json had "warnings": [], and
// both commands' documents always carry theirs (operator.md). Both now
// carry them, [] when none; and the refused document of any command
// carries the warnings said before the refusal, which --json kept off
// stderr and no document then held.
func TestRefusedDocumentWarnings(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "x-1.0-py3-none-any.whl")
	if err := os.WriteFile(bad, []byte("not a zip"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", bad}, {"lock", "resolve", "--wheel", bad, "--platform", "host"}} {
		t.Run(args[0], func(t *testing.T) {
			r := cruxprov(t, append(args, "--json")...)
			var doc map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitRefused || doc["refused"] == nil {
				t.Fatalf("%+v (%v)", r, err)
			}
			if ws, ok := doc["warnings"].([]any); !ok || len(ws) != 0 {
				t.Errorf("warnings %#v, want []: %s", doc["warnings"], r.stdout)
			}
		})
	}
	app := &cli.App{Metadata: map[string]any{optsKey: []*opts{{warnings: []string{"one"}}, {warnings: []string{"two"}}}}}
	doc := failedDoc(app, []string{"env", "create"}, map[string]any{"refused": "x"})
	if !reflect.DeepEqual(doc["warnings"], []string{"one", "two"}) {
		t.Errorf("%#v", doc)
	}
	app.Metadata[optsKey] = nil
	if doc := failedDoc(app, []string{"env", "create"}, map[string]any{}); doc["warnings"] != nil {
		t.Errorf("a command with no warnings: %#v", doc)
	}
}

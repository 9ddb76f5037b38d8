package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
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

// TestOfflineMissRemedyNoTarget: the --json remedy of an offline_miss
// (fetch online: a remedy with no target) carried "target": "", where
// refusal.Remedy's own JSON omits an empty one. It has none now, and
// still the action and the command.
func TestOfflineMissRemedyNoTarget(t *testing.T) {
	_, lock, _ := fetchFixture(t)
	r := cruxprov(t, "fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline", "--home", t.TempDir(), "--json")
	var doc struct {
		Refused struct {
			Code   string
			Remedy map[string]any
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitRefused || doc.Refused.Code != "offline_miss" {
		t.Fatalf("%+v (%v)", r, err)
	}
	rem := doc.Refused.Remedy
	if _, ok := rem["target"]; ok || rem["action"] != "fetch" || rem["command"] == "" || rem["command"] == nil {
		t.Errorf("remedy %#v", rem)
	}
}

// TestRemedyJSON: the remedy object carries the remedy's fields it has,
// no "target" when it has none, and the propose remedy's "python" with
// its "platforms" (refusals.md; it was in the command line only).
func TestRemedyJSON(t *testing.T) {
	got := remedyJSON(&refusal.Remedy{Action: refusal.ActionPropose, Target: "acme-echo", Platforms: []string{"cp311-manylinux_2_36_x86_64"}, Python: "/py/python3.11"}, "cruxprov install …", nil)
	want := map[string]any{"action": "propose", "target": "acme-echo", "command": "cruxprov install …", "platforms": []string{"cp311-manylinux_2_36_x86_64"}, "python": "/py/python3.11"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%#v\nwant %#v", got, want)
	}
	if got := remedyJSON(&refusal.Remedy{Action: refusal.ActionFetch}, "cruxprov fetch …", nil); !reflect.DeepEqual(got, map[string]any{"action": "fetch", "command": "cruxprov fetch …"}) {
		t.Errorf("%#v", got)
	}
}

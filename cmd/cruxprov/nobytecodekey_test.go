package main

import (
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestRemedyJSONNoBytecodeKey: a remedy made without bytecode says so
// under "no_bytecode", snake_case as every other multi-word key of the
// refusal's JSON (and the action "no_bytecode"); it was "noBytecode",
// which stays beside it while the documents are at v1 (docs/ci.md: a
// key a pipeline reads goes only with a new major).
func TestRemedyJSONNoBytecodeKey(t *testing.T) {
	for _, rem := range []*refusal.Remedy{
		{Action: refusal.ActionPropose, Target: "acme-echo", NoBytecode: true},
		{Action: refusal.ActionRebuildEnv, Target: "/h/envs/abc", Package: "acme-echo==1.0.0@sha256:ab", Platforms: []string{"host"}, Python: "/py", NoBytecode: true},
	} {
		got := remedyJSON(rem, "cruxprov …", nil)
		if got["no_bytecode"] != true || got["noBytecode"] != true {
			t.Errorf("%s: %#v, want \"no_bytecode\": true (and v1's \"noBytecode\")", rem.Action, got)
		}
	}
	// Without bytecode left out, neither key.
	got := remedyJSON(&refusal.Remedy{Action: refusal.ActionPropose, Target: "acme-echo"}, "cruxprov …", nil)
	if want := map[string]any{"action": "propose", "target": "acme-echo", "command": "cruxprov …"}; !reflect.DeepEqual(got, want) {
		t.Errorf("%#v\nwant %#v", got, want)
	}
}

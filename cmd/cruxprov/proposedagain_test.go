package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestProposalsAgainSayProposedAlready: key trust, key untrust, policy
// set and provider retire run again while their change-set is open find
// it open already and say so, exit 0 ("proposed already at TIME: …;
// nothing changed"; --json "already": true, key trust's "proposedAlready", its
// "already" saying the key is trusted), recording nothing, as install run
// again says it. They printed "proposed …" each time, as if new.
func TestProposalsAgainSayProposedAlready(t *testing.T) {
	base, w, _, must := govWalkStore(t)
	keys := filepath.Join(base, "keys")
	k := filepath.Join(keys, "k.key")
	// again runs args with --json, then as text, then with --json: the
	// first a new proposal, the others the same change-set open already.
	again := func(what, flag string, args ...string) string {
		t.Helper()
		doc := func() (map[string]any, string) {
			t.Helper()
			r := must(append(args, "--json")...)
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatalf("%v --json: %v: %q", args, err, r.stdout)
			}
			return v, csOf(t, r)
		}
		first, id := doc()
		if first[flag] == true {
			t.Errorf("%v, the first time: %s true", args, flag)
		}
		log := must("registry", "log").stdout
		if r := must(args...); !strings.HasPrefix(r.stdout, "proposed already at ") ||
			!strings.Contains(r.stdout, ": "+what) ||
			!strings.Contains(r.stdout, "; nothing changed\nchange-set "+id+"\napprove with: cruxprov changeset approve ") {
			t.Errorf("%v again: %q, want \"proposed already at TIME: %s; nothing changed\" and change-set %s", args, r.stdout, what, id)
		}
		second, id2 := doc()
		if second[flag] != true || id2 != id {
			t.Errorf("%v --json again: %s %v, change-set %s; want true, %s", args, flag, second[flag], id2, id)
		}
		if after := must("registry", "log").stdout; after != log {
			t.Errorf("%v again recorded in the registry's history:\n%s\nthen\n%s", args, log, after)
		}
		return id
	}
	id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile", "--quiet").stdout)
	must("changeset", "approve", id, "--key", k)

	must("key", "generate", "--out", filepath.Join(keys, "bob"))
	bob := again("trusting bob", "proposedAlready", "key", "trust", filepath.Join(keys, "bob.pub"), "--name", "bob")
	must("changeset", "approve", bob, "--key", k)
	again("untrusting bob", "already", "key", "untrust", "bob")
	again("threshold 2", "already", "policy", "set", "--threshold", "2")
	again("retiring acme-echo", "already", "provider", "retire", "acme-echo")
}

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInstallAgainSaysProposedAlready: the same install run again, nothing
// changed, finds its change-set open already and says so, exit 0 ("proposed
// already: change-set … nothing changed"; "already": true in --json, false
// for the first), recording nothing in the registry, as key trust,
// interface register and policy set run again say it. It printed "proposed
// change-set … (revision 1)" each time, as if something new had happened.
func TestInstallAgainSaysProposedAlready(t *testing.T) {
	_, w, _, must := govWalkStore(t)
	args := []string{"install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile"}
	type doc struct {
		Already   *bool
		ChangeSet struct{ Metadata struct{ ID string } }
	}
	jsonOf := func(r result) doc {
		t.Helper()
		var d doc
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Already == nil || d.ChangeSet.Metadata.ID == "" {
			t.Fatalf("install --json: %v: %+v", err, r)
		}
		return d
	}
	first := jsonOf(must(append(args, "--json")...))
	if *first.Already {
		t.Errorf("the first install: already true")
	}
	log := must("registry", "log").stdout
	r := must(args...)
	if want := "proposed already: change-set " + first.ChangeSet.Metadata.ID + " (revision 1, proposed at "; !strings.Contains(r.stdout, want) ||
		!strings.Contains(r.stdout, "): nothing changed; review it with: cruxprov changeset diff "+strings.TrimPrefix(first.ChangeSet.Metadata.ID, "sha256:")[:12]) ||
		strings.Contains(r.stdout, "proposed change-set") {
		t.Errorf("install again: %+v, want %q", r, want)
	}
	if again := jsonOf(must(append(args, "--json")...)); !*again.Already || again.ChangeSet.Metadata.ID != first.ChangeSet.Metadata.ID {
		t.Errorf("install --json again: already %v, change-set %s (want %s)", *again.Already, again.ChangeSet.Metadata.ID, first.ChangeSet.Metadata.ID)
	}
	if after := must("registry", "log").stdout; after != log {
		t.Errorf("install again recorded in the registry's history:\n%s\nthen\n%s", log, after)
	}
}

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/receipts"
)

// TestReceiptsRunningInJSON: receipts list, scan and show --json say of
// an attempt without an outcome whether it is running (its writer holds
// its idempotency key's lock: the text's RUNNING) or not (ORPHAN), as
// "running": true or false. The documents had no word of it: a running
// attempt was one of list's "orphans", as one whose executor died is, so
// a pipeline reconciling orphans from --json took a live run for a crash.
func TestReceiptsRunningInJSON(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, id := range []string{"att_keyed", "att_unkeyed"} {
		key := ""
		if id == "att_keyed" {
			key = "k1"
		}
		in := receipts.Intent{AttemptID: id, IdempotencyKey: key, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		Intent struct {
			AttemptID string `json:"attempt_id"`
		}
		Running *bool
	}
	running := func(cmd string) map[string]*bool {
		t.Helper()
		r := cruxprov(t, "receipts", cmd, "--ledger", ledger, "--json")
		var doc struct{ Attempts, Orphans []row }
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
			t.Fatalf("receipts %s --json: %v %+v", cmd, err, r)
		}
		got := map[string]*bool{}
		for _, a := range append(doc.Attempts, doc.Orphans...) {
			got[a.Intent.AttemptID] = a.Running
		}
		return got
	}
	show := func(id string) *bool {
		t.Helper()
		r := cruxprov(t, "receipts", "show", id, "--ledger", ledger, "--json")
		var doc struct{ Running *bool }
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 {
			t.Fatalf("receipts show --json: %v %+v", err, r)
		}
		return doc.Running
	}
	is := func(b *bool, want bool) bool { return b != nil && *b == want }
	for _, cmd := range []string{"list", "scan"} {
		if got := running(cmd); !is(got["att_keyed"], true) || !is(got["att_unkeyed"], false) {
			t.Errorf("receipts %s --json while the keyed run's writer holds its key: keyed %v, unkeyed %v", cmd, got["att_keyed"], got["att_unkeyed"])
		}
	}
	if !is(show("att_keyed"), true) || !is(show("att_unkeyed"), false) {
		t.Errorf("receipts show --json: keyed %v, unkeyed %v", show("att_keyed"), show("att_unkeyed"))
	}
	l.Close()
	if got := running("list"); !is(got["att_keyed"], false) {
		t.Errorf("the keyed attempt, its writer gone: %v, want running false", got["att_keyed"])
	}
	if !is(show("att_keyed"), false) {
		t.Errorf("receipts show --json of the keyed orphan: %v", show("att_keyed"))
	}
}

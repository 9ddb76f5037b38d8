package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// TestReceiptsShowLimits: a run's receipt that names limits it went
// without reads as such in receipts list and show; the container's
// --unenforced-limits is named only for a container run (a local run
// without its namespaces was not asked to go without them).
func TestReceiptsShowLimits(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, run := range []struct {
		id, backend string
		lost        []string
	}{{"att_local", "local", []string{invoke.LimitNamespaces}}, {"att_container", "container", []string{"memory", "cpus", "pids"}}} {
		in := receipts.Intent{AttemptID: run.id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: run.backend, Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d, Unenforced: run.lost}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: run.id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if r := cruxprov(t, "receipts", "list", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ok (no namespaces limits)") || !strings.Contains(r.stdout, "ok (no memory, cpus, pids limits)") {
		t.Errorf("receipts list: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_local", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ran without the namespaces limits\n") {
		t.Errorf("receipts show of the local run: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_container", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ran without the memory, cpus, pids limits (--unenforced-limits)") {
		t.Errorf("receipts show of the container run: %+v", r)
	}
}

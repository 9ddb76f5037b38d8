package receipts_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cruxible/cruxprov/receipts"
)

// An executor records the intent before it spawns the provider and the
// outcome after; a scan joins them.
func Example() {
	ctx := context.Background()
	state, _ := os.MkdirTemp("", "state-")
	defer os.RemoveAll(state)
	path := receipts.DefaultPath(state, "exec-1", 1000)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sha := "sha256:" + strings.Repeat("ab", 32)

	l, err := receipts.Open(ctx, path, receipts.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	d, err := l.Begin(ctx, receipts.Intent{
		AttemptID: "run-1", IdempotencyKey: "order-42", Provider: "acme-echo", Entrypoint: "echo",
		ImplementationDigest: sha, MaterializationDigest: sha, SealDigest: sha,
		Backend: "local", Platform: "linux-x86_64-cp312", ProtocolVersion: 1, Tool: "cruxprov 0.1",
		InputDigest: sha, StartedAt: at,
	})
	if err != nil {
		log.Fatal(err)
	}
	// ... spawn the provider (d.Replay == nil) ...
	err = l.Finish(ctx, receipts.Outcome{
		AttemptID: d.AttemptID, Status: receipts.StatusOK, StdoutBytes: 42, ResultDigest: sha,
		EndedAt: at.Add(150 * time.Millisecond),
	})
	if err != nil {
		log.Fatal(err)
	}

	res, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
	if err != nil {
		log.Fatal(err)
	}
	a := res.Attempts[0]
	fmt.Println(filepath.Base(path), len(res.Attempts), len(res.Orphans), a.Outcome.Status)
	b, _ := os.ReadFile(path)
	fmt.Print(strings.ReplaceAll(string(b), sha, "sha256:ab…"))
	// Output:
	// exec-1-1000.jsonl 1 0 ok
	// {"format":"cruxprov.receipt/v1.1","phase":"intent","attempt_id":"run-1","idempotency_key":"order-42","provider":"acme-echo","entrypoint":"echo","implementation_digest":"sha256:ab…","materialization_digest":"sha256:ab…","seal_digest":"sha256:ab…","backend":"local","platform":"linux-x86_64-cp312","protocol_version":1,"tool":"cruxprov 0.1","input_digest":"sha256:ab…","started_at":"2026-03-01T12:00:00Z"}
	// {"format":"cruxprov.receipt/v1.1","phase":"outcome","attempt_id":"run-1","status":"ok","exit_code":0,"stdout_bytes":42,"stderr_bytes":0,"result_digest":"sha256:ab…","error_code":"","error_message":"","stderr_tail":"","egress_declared":[],"egress_observed":[],"replayed":false,"ended_at":"2026-03-01T12:00:00.15Z"}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/receipts"
)

// TestReceiptsLedgerNamedTwiceCountsOnce: a ledger named twice, by its
// path and through a symbolic link, is read once (receipts.md), and the
// scan says so: "in 1 ledger", and --json's "ledgers" names it once. It
// said "in 3 ledgers" for one file, listing it three times.
func TestReceiptsLedgerNamedTwiceCountsOnce(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(ledger, link); err != nil {
		t.Fatal(err)
	}
	args := []string{"receipts", "scan", "--ledger", ledger, "--ledger", ledger, "--ledger", link}
	if r := cruxprov(t, args...); r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), " in 1 ledger") {
		t.Errorf("scan of one ledger named three times: %+v", r)
	}
	r := cruxprov(t, append(args, "--json")...)
	var doc struct{ Ledgers []string }
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Ledgers) != 1 || doc.Ledgers[0] != ledger {
		t.Errorf("--json ledgers: %v %+v", err, r)
	}
}

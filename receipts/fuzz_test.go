package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// FuzzRepairTail writes two valid rows and then arbitrary bytes, opens the
// ledger (which repairs its tail) and appends. Either Open refuses
// ledger_corrupt and the file is unchanged, or: the strict scan is clean,
// the bytes before the tail's last newline are unchanged, and the
// fragment after it is either terminated (a complete record) or
// quarantined with its exact bytes. No complete row is ever lost.
func FuzzRepairTail(f *testing.F) {
	complete := bytes.TrimSuffix([]byte(rows(f, "c")), []byte("\n"))
	f.Add([]byte{})
	f.Add(complete)
	f.Add(complete[:17])
	f.Add([]byte("\n"))
	f.Add(append([]byte(rows(f, "d")), complete[:40]...))
	f.Add([]byte("\x00\xff{\"format\":"))
	f.Add(append(complete, ' '))
	prefix := []byte(rows(f, "p1", "p2"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, tail []byte) {
		path := filepath.Join(dir, "l.jsonl")
		os.Remove(path)
		content := append(bytes.Clone(prefix), tail...)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(context.Background(), path, Options{})
		if err != nil {
			if !errors.Is(err, refusal.LedgerCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, content) {
				t.Fatal("a refused Open changed the ledger")
			}
			return
		}
		if _, err := l.Begin(context.Background(), testIntent("", "", "in")); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		l.Close()
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cut := len(prefix) + bytes.LastIndexByte(tail, '\n') + 1
		frag := content[cut:]
		if !bytes.HasPrefix(after, content[:cut]) {
			t.Fatal("the repair changed bytes before the tail")
		}
		res, err := Scan(context.Background(), []string{path}, ScanOptions{})
		if err != nil {
			t.Fatalf("strict scan after repair: %v", err)
		}
		if len(res.Tails) != 0 {
			t.Fatal("tail left unterminated")
		}
		if res.Attempts[0].Intent.AttemptID != "p1" || res.Attempts[1].Intent.AttemptID != "p2" {
			t.Fatal("a complete row was lost")
		}
		if len(frag) == 0 {
			return
		}
		if _, perr := parseRow(frag); perr == nil {
			if !bytes.HasPrefix(after, append(bytes.Clone(content), '\n')) || len(res.Torn) != 0 {
				t.Fatal("a complete record at the tail was not terminated in place")
			}
			return
		}
		if len(res.Torn) != 1 || !bytes.Equal(res.Torn[0].Bytes, frag) || res.Torn[0].Offset != int64(cut) {
			t.Fatalf("fragment %q not quarantined exactly: %+v", frag, res.Torn)
		}
	})
}

// FuzzValidJSON holds validJSON to json.Valid, the validator the row
// parser used before it: the two agree on every input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases {
		f.Add([]byte(s))
	}
	f.Add([]byte(rows(f, "c")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

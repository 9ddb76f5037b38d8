package receipts

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkAppend is one receipt: an intent and an outcome, each written
// with one write(2) and synced (fdatasync) before returning.
func BenchmarkAppend(b *testing.B) {
	l, err := Open(context.Background(), filepath.Join(b.TempDir(), "l.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for b.Loop() {
		d, err := l.Begin(ctx, testIntent("", "", "in"))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Finish(ctx, testOutcome(d.AttemptID, StatusOK)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScan reads back a ledger of 10,000 receipts strictly.
func BenchmarkScan(b *testing.B) {
	path := filepath.Join(b.TempDir(), "l.jsonl")
	var buf []byte
	for i := range 10000 {
		id := "a" + itoa(i)
		in, _ := encodeIntent(testIntent(id, "", "in"))
		out, _ := encodeOutcome(testOutcome(id, StatusOK))
		buf = append(append(buf, in...), out...)
	}
	appendFile(b, path, string(buf))
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := Scan(context.Background(), []string{path}, ScanOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

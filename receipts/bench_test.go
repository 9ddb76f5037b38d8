package receipts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// BenchmarkOpen is what every `cruxprov run` pays before it spawns: Open
// reads a ledger of N receipts, each under its own idempotency key,
// strictly, and folds them for Begin's idempotency decisions. Its peer,
// peer=encoding-json, reads the same file line by line into generic maps
// with encoding/json (json.Unmarshal into map[string]any: no types, no
// duplicate keys, no joining), the least a Go reader of JSON lines does.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		path := filepath.Join(b.TempDir(), "l.jsonl")
		var buf []byte
		for i := range n {
			id := "a" + itoa(i)
			in, _ := encodeIntent(testIntent(id, "k"+itoa(i), "in"))
			out, _ := encodeOutcome(testOutcome(id, StatusOK))
			buf = append(append(buf, in...), out...)
		}
		appendFile(b, path, string(buf))
		ctx := context.Background()
		b.Run(fmt.Sprintf("receipts=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				l, err := Open(ctx, path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
		})
		b.Run(fmt.Sprintf("receipts=%d/peer=encoding-json", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				sc.Buffer(make([]byte, 64<<10), maxLine)
				for sc.Scan() {
					var m map[string]any
					if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
				if sc.Err() != nil {
					b.Fatal(sc.Err())
				}
			}
		})
	}
}

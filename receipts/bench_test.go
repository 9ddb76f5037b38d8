package receipts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
// strictly, and folds them for Begin's idempotency decisions.
//   - receipts=N: from the checkpoint an earlier Open wrote (the ledger's
//     bytes hashed, the rows after the checkpoint parsed: none here);
//   - no-checkpoint: Options.NoCheckpoint, every row parsed;
//   - first-open: the checkpoint removed before each Open, which reads
//     every row, hashes them and writes a new one;
//   - peer=encoding-json: the same file read line by line into generic
//     maps with encoding/json (json.Unmarshal into map[string]any: no
//     types, no duplicate keys, no joining), the least a Go reader of JSON
//     lines does.
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
		open := func(b *testing.B, opts Options) *Ledger {
			l, err := Open(ctx, path, opts)
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
			return l
		}
		open(b, Options{})
		b.Run(fmt.Sprintf("receipts=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if l := open(b, Options{}); l.ckptAt != int64(len(buf)) {
					b.Fatal("not opened from the checkpoint")
				}
			}
		})
		b.Run(fmt.Sprintf("receipts=%d/no-checkpoint", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				open(b, Options{NoCheckpoint: true})
			}
		})
		b.Run(fmt.Sprintf("receipts=%d/first-open", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				b.StopTimer()
				os.Remove(path + ".checkpoint")
				b.StartTimer()
				open(b, Options{})
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

// BenchmarkHeld is the memory a Ledger holds per receipt it knows, which
// an executor that stays up holds for every run it made: the heap in use
// after a collection, less the heap before Open, over the receipts
// (100,000; every other one an error with 2 KiB of stderr tail, half
// what invoke keeps), each under its own idempotency key (keys=unique: a
// key's first attempt keeps its request) or under none (keys=none).
// joiner=scan is the scan's joiner on the same rows, which keeps whole
// receipts, as the Ledger did before it kept only what Begin and Finish
// read.
func BenchmarkHeld(b *testing.B) {
	const n = 100000
	for _, keyed := range []bool{true, false} {
		path := filepath.Join(b.TempDir(), "l.jsonl")
		var buf []byte
		for i := range n {
			id := "a" + itoa(i)
			key := ""
			if keyed {
				key = "k" + itoa(i)
			}
			in, _ := encodeIntent(testIntent(id, key, "in"+itoa(i)))
			o := testOutcome(id, []string{StatusOK, StatusError}[i%2])
			if o.Status == StatusError {
				o.StderrTail = strings.Repeat("Traceback line "+itoa(i)+"\n", 2048/(16+len(itoa(i))))
			}
			out, _ := encodeOutcome(o)
			buf = append(append(buf, in...), out...)
		}
		appendFile(b, path, string(buf))
		heap := func() uint64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		keys := map[bool]string{true: "keys=unique", false: "keys=none"}[keyed]
		for _, tc := range []struct {
			name string
			open func() any
		}{
			{"ledger", func() any {
				l, err := Open(context.Background(), path, Options{NoCheckpoint: true})
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
				return l
			}},
			{"ledger-from-checkpoint", func() any {
				l, err := Open(context.Background(), path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
				return l
			}},
			{"joiner=scan", func() any {
				res, err := Scan(context.Background(), []string{path}, ScanOptions{})
				if err != nil {
					b.Fatal(err)
				}
				return res
			}},
		} {
			b.Run(keys+"/"+tc.name, func(b *testing.B) {
				var held uint64
				for b.Loop() {
					before := heap()
					v := tc.open()
					held = heap() - before
					runtime.KeepAlive(v)
				}
				b.ReportMetric(float64(held)/n, "B/receipt")
			})
		}
	}
}

package invoke_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestNilCallRefused: a nil *Call (what pinned.Call builds for a request
// the verified pin cannot name, docs/executor.md's watched example passes
// it on) is refused entrypoint_unknown by Subprocess and by Dispatch, with
// nothing written to the ledger. Both panicked, which ends an executor
// that stays up.
func TestNilCallRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "receipts.jsonl")
	led, err := receipts.Open(ctx, path, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	run := map[string]func() (*invoke.Result, error){
		"Subprocess": func() (*invoke.Result, error) { return (&invoke.Subprocess{Ledger: led}).Run(ctx, nil) },
		"Dispatch": func() (*invoke.Result, error) {
			return invoke.Dispatch(ctx, nil, &shimBackend{argv: []string{"/bin/true"}}, invoke.DispatchOptions{Ledger: led})
		},
	}
	for name, f := range run {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s of a nil call panicked: %v", name, r)
				}
			}()
			res, err := f()
			if res != nil || refusal.CodeOf(err) != refusal.EntrypointUnknown {
				t.Errorf("%s of a nil call: %+v %v, want entrypoint_unknown", name, res, err)
			}
		}()
	}
	sc, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
	if err != nil || len(sc.Attempts) != 0 || len(sc.Unmatched) != 0 {
		t.Errorf("the ledger after nil calls: %+v, %v; want nothing in it", sc, err)
	}
}

package invoke

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/cruxible/cruxprov/receipts"
)

// FuzzParseOutput: whatever a provider writes on stdout (it is untrusted),
// parseOutput makes an ok result with one valid JSON value, or an error
// with a code, without panicking; and the receipt of that run fits a
// ledger row, however much the provider said.
func FuzzParseOutput(f *testing.F) {
	f.Add([]byte(`{"status":"ok","run_id":"run-1","result":{"a":[1,"<>"]},"egress":["https://x.example/"]}`))
	f.Add([]byte(`{"status":"error","run_id":"run-1","error":{"code":"boom","message":"<<<<"},"egress":[]}`))
	f.Add([]byte(`{"status":"error","run_id":"run-1","error":{"code":"provider_error","message":"<<<<"},"egress":[]}`))
	f.Add([]byte(`{"status":"ok","run_id":"run-2","result":1,"egress":[]}`))
	f.Add([]byte(`{"status":"ok","run_id":"run-1","result":"\xed\xa0\x80","egress":[]}`))
	f.Add([]byte(`{"status":"ok","run_id":"run-1","result":1,"egress":[]} {}`))
	f.Add([]byte(`{"status":"ok","run_id":"run-1","result":1,"egress":[],"extra":1}`))
	f.Add([]byte(`[1,2,3]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, out []byte) {
		res := &Result{AttemptID: "run-1", Egress: []string{}}
		parseOutput(res, out, "run-1")
		switch res.Status {
		case StatusOK:
			if res.Error != nil || !json.Valid(res.Value) || !utf8.Valid(res.Value) {
				t.Fatalf("an ok result with error %+v or a value that is not UTF-8 JSON: %q", res.Error, res.Value)
			}
		case StatusError:
			if res.Error == nil || res.Error.Code == "" || res.Value != nil {
				t.Fatalf("an error result without a code, or with a value: %+v", res)
			}
			if c := res.Error.Code; c != CodeProtocolError && c != CodeExited && !slices.Contains(ResultCodes, c) {
				t.Fatalf("the provider's own code %q passed", c)
			}
		default:
			t.Fatalf("status %q", res.Status)
		}
		o := (&recorder{attempt: "run-1"}).outcome(res, "")
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		// The outcome of any run the output budget allows (1 MiB, the
		// default) fits a row with room to spare.
		if len(out) <= 1<<20 && len(b) > receipts.MaxRow/2 {
			t.Fatalf("a %d-byte stdout made a %d-byte outcome", len(out), len(b))
		}
		if o.EgressObservedDropped > 0 && len(o.EgressObserved)+o.EgressObservedDropped != len(res.Egress) {
			t.Fatalf("kept %d and dropped %d of %d URLs", len(o.EgressObserved), o.EgressObservedDropped, len(res.Egress))
		}
	})
}

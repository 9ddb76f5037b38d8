package invoke

import (
	"bytes"
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

// FuzzDuplicateKey: on any valid JSON no deeper than MaxInputDepth,
// duplicateKey agrees with a decode that keeps every member of every
// object: a key it reports is one some object holds twice, and it reports
// one whenever an object does.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[1,{"x":1,"x":2}]}`, `{"\u0061":1,"a":2}`, `[{"a":1},{"a":2}]`, `{"a":{"a":1}}`, `"x"`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || pythonCannotRead(b) != "" {
			return
		}
		key, ok := duplicateKey(b)
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		dups := map[string]bool{}
		var walk func(dec *json.Decoder)
		walk = func(dec *json.Decoder) {
			tok, _ := dec.Token()
			switch tok {
			case json.Delim('{'):
				seen := map[string]bool{}
				for dec.More() {
					k, _ := dec.Token()
					ks, _ := k.(string)
					if seen[ks] {
						dups[ks] = true
					}
					seen[ks] = true
					walk(dec)
				}
				dec.Token()
			case json.Delim('['):
				for dec.More() {
					walk(dec)
				}
				dec.Token()
			}
		}
		walk(json.NewDecoder(bytes.NewReader(b)))
		if ok != (len(dups) > 0) || ok && !dups[key] {
			t.Fatalf("duplicateKey(%s) = %q, %v; the objects hold twice %v", b, key, ok, dups)
		}
	})
}

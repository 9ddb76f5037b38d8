package receipts

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func dg(s string) string { return digest.Sum([]byte(s)).String() }

// testIntent returns a valid intent; key and input vary per test.
func testIntent(id, key, input string) Intent {
	return Intent{
		AttemptID: id, IdempotencyKey: key, Provider: "acme-echo", Entrypoint: "echo",
		ImplementationDigest: dg("impl"), MaterializationDigest: dg("mat"), SealDigest: dg("seal"),
		Backend: "local", Platform: "linux-x86_64-cp312", ProtocolVersion: 1, Tool: "cruxprov test",
		InputDigest: dg(input), StartedAt: t0,
	}
}

func testOutcome(id, status string) Outcome {
	o := Outcome{AttemptID: id, Status: status, ExitCode: 0, StdoutBytes: 10, StderrBytes: 3,
		EgressDeclared: []string{"https://api.example"}, EgressObserved: []string{}, EndedAt: t0.Add(time.Second)}
	if status == StatusOK {
		o.ResultDigest = dg("result")
	} else {
		o.ExitCode = 1
		o.ErrorCode = "provider_error"
		o.ErrorMessage = "boom"
		o.StderrTail = "Traceback…\n[redacted]"
	}
	return o
}

func mustLine(t testing.TB) func([]byte, error) string {
	return func(b []byte, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(string(b), "\n")
	}
}

// edit decodes a row, applies fn to its map and re-encodes it.
func edit(t *testing.T, line string, fn func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseRow(t *testing.T) {
	intent := mustLine(t)(encodeIntent(testIntent("a1", "k", "in")))
	okOut := mustLine(t)(encodeOutcome(testOutcome("a1", StatusOK)))
	errOut := mustLine(t)(encodeOutcome(testOutcome("a1", StatusError)))
	torn := strings.TrimSuffix(string(encodeTorn(42, []byte("{\"format\":\"crux"), t0)), "\n")
	tests := []struct {
		name  string
		line  string
		phase string // "" when it must fail
		why   string // a substring of the error
	}{
		{"intent", intent, PhaseIntent, ""},
		{"outcome ok", okOut, PhaseOutcome, ""},
		{"outcome error", errOut, PhaseOutcome, ""},
		{"torn", torn, PhaseTorn, ""},
		{"minor version ignores new fields", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.receipt/v1.3"; m["new"] = 1 }), PhaseIntent, ""},
		{"v1.0", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.receipt/v1.0" }), PhaseIntent, ""},
		{"unknown field in v1", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.receipt/v1"; m["new"] = 1 }), "", "unknown field"},
		{"unenforced limits", edit(t, intent, func(m map[string]any) { m["unenforced"] = []string{"memory", "cpus", "pids"} }), PhaseIntent, ""},
		{"unenforced in v1", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.receipt/v1"; m["unenforced"] = []string{"memory"} }), "", "v1.1's"},
		{"unenforced empty", edit(t, intent, func(m map[string]any) { m["unenforced"] = []string{} }), "", "is empty"},
		{"unenforced null", edit(t, intent, func(m map[string]any) { m["unenforced"] = nil }), "", "array of strings"},
		{"egress dropped", edit(t, okOut, func(m map[string]any) { m["egress_observed_dropped"] = 12 }), PhaseOutcome, ""},
		{"egress dropped in v1", edit(t, okOut, func(m map[string]any) { m["format"] = "cruxprov.receipt/v1"; m["egress_observed_dropped"] = 12 }), "", "v1.1's"},
		{"egress dropped zero", edit(t, okOut, func(m map[string]any) { m["egress_observed_dropped"] = 0 }), "", "egress_observed_dropped"},
		{"egress dropped negative", edit(t, okOut, func(m map[string]any) { m["egress_observed_dropped"] = -3 }), "", "egress_observed_dropped"},
		{"unenforced empty name", edit(t, intent, func(m map[string]any) { m["unenforced"] = []string{"memory", ""} }), "", "empty string"},
		{"unknown major", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.receipt/v2" }), "", "unknown major"},
		{"other format", edit(t, intent, func(m map[string]any) { m["format"] = "cruxprov.seal/v1" }), "", "not a receipts ledger format"},
		{"no format", edit(t, intent, func(m map[string]any) { delete(m, "format") }), "", "missing field \"format\""},
		{"unknown phase", edit(t, intent, func(m map[string]any) { m["phase"] = "maybe" }), "", "unknown phase"},
		{"missing provider", edit(t, intent, func(m map[string]any) { delete(m, "provider") }), "", "missing field \"provider\""},
		{"empty provider", edit(t, intent, func(m map[string]any) { m["provider"] = "" }), "", "is empty"},
		{"number as string", edit(t, intent, func(m map[string]any) { m["protocol_version"] = "1" }), "", "protocol_version"},
		{"fractional number", edit(t, intent, func(m map[string]any) { m["protocol_version"] = 1.5 }), "", "protocol_version"},
		{"null string", edit(t, intent, func(m map[string]any) { m["backend"] = nil }), "", "not a string"},
		{"bad digest", edit(t, intent, func(m map[string]any) { m["input_digest"] = "sha256:ABC" }), "", "input_digest"},
		{"empty seal digest", edit(t, intent, func(m map[string]any) { m["seal_digest"] = "" }), PhaseIntent, ""},
		{"bad attempt id", edit(t, intent, func(m map[string]any) { m["attempt_id"] = "a/b" }), "", "attempt id"},
		{"bad time", edit(t, intent, func(m map[string]any) { m["started_at"] = "yesterday" }), "", "RFC 3339"},
		{"unknown status", edit(t, errOut, func(m map[string]any) { m["status"] = "fine" }), "", "unknown status"},
		{"ok without result", edit(t, okOut, func(m map[string]any) { m["result_digest"] = "" }), "", "no result_digest"},
		{"negative bytes", edit(t, okOut, func(m map[string]any) { m["stdout_bytes"] = -1 }), "", "stdout_bytes"},
		{"egress null", edit(t, okOut, func(m map[string]any) { m["egress_observed"] = nil }), "", "array of strings"},
		{"egress of numbers", edit(t, okOut, func(m map[string]any) { m["egress_observed"] = []int{1} }), "", "array of strings"},
		{"replayed without replay_of", edit(t, okOut, func(m map[string]any) { m["replayed"] = true }), "", "disagree"},
		{"torn bad sha", edit(t, torn, func(m map[string]any) { m["sha256"] = dg("x") }), "", "does not hash"},
		{"torn bad length", edit(t, torn, func(m map[string]any) { m["length"] = 3 }), "", "length says"},
		{"torn bad base64", edit(t, torn, func(m map[string]any) { m["bytes_b64"] = "!!" }), "", "base64"},
		{"duplicate key", strings.Replace(intent, `"backend":"local"`, `"backend":"local","backend":"container"`, 1), "", "duplicate field"},
		{"invalid UTF-8", strings.Replace(intent, "acme-echo", "acme-\xff", 1), "", "UTF-8"},
		{"leading space", " " + intent, "", "alone on its line"},
		{"trailing CR", intent + "\r", "", "alone on its line"},
		{"two objects", intent + intent, "", "not valid JSON"},
		{"array", "[1]", "", "alone on its line"},
		{"empty", "", "", "alone on its line"},
		{"truncated", intent[:len(intent)/2], "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseRow([]byte(tc.line))
			if tc.phase == "" {
				if err == nil {
					t.Fatalf("parsed %q", tc.line)
				}
				if !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("error %q does not say %q", err, tc.why)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[bool]string{r.intent != nil: PhaseIntent, r.outcome != nil: PhaseOutcome, r.torn != nil: PhaseTorn}[true]
			if got != tc.phase {
				t.Fatalf("phase %q, want %q", got, tc.phase)
			}
		})
	}
}

// TestRowRoundTrip: what is written parses back to the same values.
func TestRowRoundTrip(t *testing.T) {
	in := testIntent("a1", "k", "in")
	r, err := parseRow(bytes.TrimSuffix(mustBytes(t)(encodeIntent(in)), []byte("\n")))
	if err != nil || !reflect.DeepEqual(*r.intent, in) {
		t.Fatalf("intent round trip: %v\n%+v\n%+v", err, r.intent, in)
	}
	out := testOutcome("a1", StatusError)
	r, err = parseRow(bytes.TrimSuffix(mustBytes(t)(encodeOutcome(out)), []byte("\n")))
	if err != nil || !reflect.DeepEqual(*r.outcome, out) {
		t.Fatalf("outcome round trip: %v\n%+v\n%+v", err, r.outcome, out)
	}
	// Invalid UTF-8 in a caller's string is written as U+FFFD, never as a
	// line a strict scan refuses.
	out.StderrTail = "bad \xff byte"
	if _, err := encodeOutcome(out); err != nil {
		t.Fatal(err)
	}
}

func mustBytes(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// FuzzParseRow: no panic on any line; a row that parses re-encodes to a
// row that parses to the same values.
func FuzzParseRow(f *testing.F) {
	in, _ := encodeIntent(testIntent("a1", "k", "in"))
	out, _ := encodeOutcome(testOutcome("a1", StatusOK))
	f.Add(bytes.TrimSpace(in))
	limited := testIntent("a2", "", "in")
	limited.Unenforced = []string{"memory", "pids"}
	lim, _ := encodeIntent(limited)
	f.Add(bytes.TrimSpace(lim))
	f.Add(bytes.TrimSpace(out))
	f.Add(bytes.TrimSpace(encodeTorn(7, []byte("frag\xff"), t0)))
	f.Add([]byte(`{"format":"cruxprov.receipt/v1","phase":"intent","a":{"b":[1,2]}}`))
	f.Add([]byte(`{"format":"cruxprov.receipt/v9","phase":"torn"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseRow(line)
		if err != nil {
			return
		}
		switch {
		case r.intent != nil:
			b, err := encodeIntent(*r.intent)
			if err != nil {
				t.Fatalf("parsed intent does not encode: %v", err)
			}
			r2, err := parseRow(bytes.TrimSuffix(b, []byte("\n")))
			if err != nil || !sameInstant(r2.intent.StartedAt, r.intent.StartedAt) || !slices.Equal(r2.intent.Unenforced, r.intent.Unenforced) {
				t.Fatalf("re-encoded intent: %v", err)
			}
		case r.outcome != nil:
			if len(line) >= MaxRow {
				return
			}
			b, err := encodeOutcome(*r.outcome)
			if err != nil {
				t.Fatalf("parsed outcome does not encode: %v", err)
			}
			if _, err := parseRow(bytes.TrimSuffix(b, []byte("\n"))); err != nil {
				t.Fatalf("re-encoded outcome: %v", err)
			}
		case r.torn != nil:
			if digest.Sum(r.torn.Bytes).String() != r.torn.SHA256 {
				t.Fatal("torn row's bytes do not match its sha256")
			}
		default:
			t.Fatal("parsed row with no phase")
		}
	})
}

func sameInstant(a, b time.Time) bool { return a.Equal(b) }

package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

func openT(t testing.TB, path string) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func scanT(t testing.TB, paths ...string) *ScanResult {
	t.Helper()
	res, err := Scan(context.Background(), paths, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func begin(t testing.TB, l *Ledger, in Intent) Decision {
	t.Helper()
	d, err := l.Begin(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func finish(t testing.TB, l *Ledger, out Outcome) {
	t.Helper()
	if err := l.Finish(context.Background(), out); err != nil {
		t.Fatal(err)
	}
}

func TestBeginFinishScan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "cruxprov", "receipts", "h-0.jsonl")
	l := openT(t, path)
	d := begin(t, l, testIntent("", "", "in"))
	if !generatedID.MatchString(d.AttemptID) || d.Attempt != 1 || d.Replay != nil {
		t.Fatalf("decision %+v", d)
	}
	// Durable before Begin returns: another reader sees the intent.
	res := scanT(t, path)
	if len(res.Orphans) != 1 || res.Orphans[0].Intent.AttemptID != d.AttemptID {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	finish(t, l, testOutcome(d.AttemptID, StatusOK))
	res = scanT(t, path)
	if len(res.Attempts) != 1 || len(res.Orphans) != 0 || res.Attempts[0].Outcome == nil ||
		res.Attempts[0].Outcome.ResultDigest != dg("result") || res.Attempts[0].Line != 1 {
		t.Fatalf("scan %+v", res)
	}
	for _, p := range []string{path, filepath.Dir(path), filepath.Join(dir, "state")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o700) | os.ModeDir
		if p == path {
			want = 0o600
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Begin(context.Background(), testIntent("", "", "x")); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("Begin after Close: %v", err)
	}
}

// TestUnenforcedRoundTrip: the limits a run went without reach the
// ledger and come back from a scan, and an intent with none carries no
// field at all.
func TestUnenforcedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l := openT(t, path)
	in := testIntent("a1", "", "in")
	in.Unenforced = []string{"memory", "cpus", "pids"}
	begin(t, l, in)
	begin(t, l, testIntent("a2", "", "in"))
	res := scanT(t, path)
	if len(res.Orphans) != 2 || !reflect.DeepEqual(res.Orphans[0].Intent, in) || res.Orphans[1].Intent.Unenforced != nil {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.Contains(lines[0], `"unenforced":["memory","cpus","pids"]`) || strings.Contains(lines[1], "unenforced") {
		t.Errorf("ledger:\n%s", b)
	}
}

func TestFinishRefusals(t *testing.T) {
	l := openT(t, filepath.Join(t.TempDir(), "l.jsonl"))
	d := begin(t, l, testIntent("a1", "", "in"))
	bad := testOutcome(d.AttemptID, StatusOK)
	bad.ResultDigest = ""
	tests := []struct {
		name string
		out  Outcome
	}{
		{"unknown attempt", testOutcome("nope", StatusOK)},
		{"invalid outcome", bad},
		{"unknown status", func() Outcome { o := testOutcome(d.AttemptID, StatusOK); o.Status = "meh"; return o }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.Finish(context.Background(), tc.out); !errors.Is(err, refusal.LedgerWriteFailed) {
				t.Fatalf("got %v", err)
			}
		})
	}
	finish(t, l, testOutcome("a1", StatusOK))
	if err := l.Finish(context.Background(), testOutcome("a1", StatusOK)); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("second outcome: %v", err)
	}
	if _, err := l.Begin(context.Background(), testIntent("a1", "", "in")); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("reused attempt id: %v", err)
	}
	in := testIntent("", "", "in")
	in.MaterializationDigest = ""
	if _, err := l.Begin(context.Background(), in); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("intent without a digest: %v", err)
	}
}

// TestIdempotency holds Begin to DESIGN §10, each case from a fresh
// ledger, reopened between the first and the second call (the decision
// comes from the file, not from memory).
func TestIdempotency(t *testing.T) {
	tests := []struct {
		name    string
		first   string // status of the first attempt; "" leaves an orphan
		second  Intent
		code    refusal.Code
		replay  bool
		attempt int
	}{
		{"same key other input", StatusOK, testIntent("", "k", "other"), refusal.IdempotencyConflict, false, 0},
		{"same key other input after error", StatusError, testIntent("", "k", "other"), refusal.IdempotencyConflict, false, 0},
		{"same key other input after orphan", "", testIntent("", "k", "other"), refusal.IdempotencyConflict, false, 0},
		{"same key other provider", StatusOK, func() Intent { i := testIntent("", "k", "in"); i.Provider = "acme-other"; return i }(), refusal.IdempotencyConflict, false, 0},
		{"same key other entrypoint", StatusOK, func() Intent { i := testIntent("", "k", "in"); i.Entrypoint = "other"; return i }(), refusal.IdempotencyConflict, false, 0},
		{"replay of ok", StatusOK, testIntent("", "k", "in"), "", true, 2},
		{"new attempt after error", StatusError, testIntent("", "k", "in"), "", false, 2},
		{"new attempt after timeout", StatusTimeout, testIntent("", "k", "in"), "", false, 2},
		{"new attempt after output limit", StatusOutputLimit, testIntent("", "k", "in"), "", false, 2},
		{"new attempt after refused", StatusRefused, testIntent("", "k", "in"), "", false, 2},
		{"new attempt after orphan", "", testIntent("", "k", "in"), "", false, 2},
		{"other key", StatusOK, testIntent("", "k2", "other"), "", false, 1},
		{"no key", StatusOK, testIntent("", "", "in"), "", false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			l := openT(t, path)
			d1 := begin(t, l, testIntent("first", "k", "in"))
			if tc.first != "" {
				finish(t, l, testOutcome(d1.AttemptID, tc.first))
			}
			l.Close()
			before, _ := os.ReadFile(path)
			l = openT(t, path)
			d, err := l.Begin(context.Background(), tc.second)
			if tc.code != "" {
				if !errors.Is(err, tc.code) {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				// The refusal says what to do next (DESIGN §2), not only
				// what clashed: `cruxprov run` prints it as it is.
				if !strings.Contains(err.Error(), "give a new request a new key, or send attempt first's input again under this one") {
					t.Fatalf("the refusal does not say what to do: %v", err)
				}
				// And what that gets: the recorded outcome only where one
				// ended ok; after an error or an orphan it runs again (it
				// promised the recorded outcome of a run that had none).
				if ok := tc.first == StatusOK; ok != strings.HasSuffix(err.Error(), " to get its recorded outcome") ||
					!ok && !strings.HasSuffix(err.Error(), " to run it again (no attempt under the key has ended ok)") {
					t.Fatalf("the refusal's remedy after a first attempt %q: %v", tc.first, err)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Fatal("a refused Begin wrote to the ledger")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Attempt != tc.attempt || (d.Replay != nil) != tc.replay {
				t.Fatalf("decision %+v", d)
			}
			res := scanT(t, path)
			if tc.replay {
				r := d.Replay
				if !r.Replayed || r.ReplayOf != "first" || r.AttemptID != d.AttemptID || r.ResultDigest != dg("result") {
					t.Fatalf("replay %+v", r)
				}
				// Written: the replay's intent and its replayed outcome.
				last := res.Attempts[len(res.Attempts)-1]
				if last.Intent.AttemptID != d.AttemptID || last.Outcome == nil || !last.Outcome.Replayed {
					t.Fatalf("replay not in the ledger: %+v", last)
				}
				// A replay of the replay names the original.
				d3 := begin(t, l, testIntent("", "k", "in"))
				if d3.Replay == nil || d3.Replay.ReplayOf != "first" || d3.Attempt != 3 {
					t.Fatalf("third call %+v", d3)
				}
				return
			}
			if len(res.Orphans) != 1 || res.Orphans[0].Intent.AttemptID != d.AttemptID {
				if !(tc.first == "" && len(res.Orphans) == 2) {
					t.Fatalf("orphans %+v", res.Orphans)
				}
			}
		})
	}
}

// TestRunningAttemptConflicts: a second Begin under a key whose attempt
// this Ledger has not finished is a conflict; once finished (even when
// its outcome could not be written), the key runs again.
func TestRunningAttemptConflicts(t *testing.T) {
	l := openT(t, filepath.Join(t.TempDir(), "l.jsonl"))
	d := begin(t, l, testIntent("", "k", "in"))
	if _, err := l.Begin(context.Background(), testIntent("", "k", "in")); !errors.Is(err, refusal.IdempotencyConflict) {
		t.Fatalf("got %v", err)
	}
	bad := testOutcome(d.AttemptID, StatusOK)
	bad.ResultDigest = ""
	if err := l.Finish(context.Background(), bad); err == nil {
		t.Fatal("invalid outcome accepted")
	}
	if d2 := begin(t, l, testIntent("", "k", "in")); d2.Attempt != 2 {
		t.Fatalf("after a failed Finish: %+v", d2)
	}
}

// TestOutcomeResolvesOnlyItsOwnAttempt: two attempts under one key, the
// outcome of the second leaves the first an orphan.
func TestOutcomeResolvesOnlyItsOwnAttempt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	l := openT(t, path)
	a := begin(t, l, testIntent("a", "k", "in"))
	l.Close()
	l = openT(t, path) // a is now an orphan of a dead writer
	b := begin(t, l, testIntent("b", "k", "in"))
	finish(t, l, testOutcome(b.AttemptID, StatusError))
	res := scanT(t, path)
	if len(res.Orphans) != 1 || res.Orphans[0].Intent.AttemptID != a.AttemptID {
		t.Fatalf("orphans %+v", res.Orphans)
	}
	if res.Attempts[1].Outcome == nil || res.Attempts[1].Outcome.AttemptID != "b" {
		t.Fatalf("attempts %+v", res.Attempts)
	}
}

// TestScanMerges joins across ledgers and reports outcomes without intent.
func TestScanMerges(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	l1, l2 := openT(t, p1), openT(t, p2)
	begin(t, l1, testIntent("x1", "", "in"))
	begin(t, l2, testIntent("x2", "", "in"))
	finish(t, l2, testOutcome("x2", StatusOK))
	o, _ := encodeOutcome(testOutcome("ghost", StatusOK))
	appendFile(t, p2, string(o))
	res := scanT(t, p1, p2)
	if len(res.Attempts) != 2 || res.Attempts[0].Path != p1 || res.Attempts[1].Path != p2 ||
		len(res.Orphans) != 1 || len(res.Unmatched) != 1 || res.Unmatched[0].Value.AttemptID != "ghost" || res.Unmatched[0].Line != 3 {
		t.Fatalf("scan %+v", res)
	}
	if _, err := Scan(context.Background(), []string{filepath.Join(dir, "missing")}, ScanOptions{}); err == nil {
		t.Fatal("scan of a missing ledger succeeded")
	}
}

// TestScanLedgerAndCopy: a ledger named twice is read once; a ledger and
// its copy given together hold the same attempts, and the refusal says
// so (and that each can be scanned alone), not that one is corrupt.
func TestScanLedgerAndCopy(t *testing.T) {
	dir := t.TempDir()
	p, cp := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "copy.jsonl")
	l := openT(t, p)
	begin(t, l, testIntent("x1", "", "in"))
	finish(t, l, testOutcome("x1", StatusOK))
	if res := scanT(t, p, p); len(res.Attempts) != 1 || len(res.Corrupt) != 0 {
		t.Fatalf("the same ledger twice: %+v", res)
	}
	b, _ := os.ReadFile(p)
	os.WriteFile(cp, b, 0o600)
	_, err := Scan(context.Background(), []string{p, cp}, ScanOptions{})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.AlsoIn != p || ce.Path != cp || !strings.Contains(err.Error(), "hold the same attempt") {
		t.Fatalf("a ledger and its copy: %v", err)
	}
	res, err := Scan(context.Background(), []string{p, cp}, ScanOptions{TolerateCorrupt: true})
	if err != nil || len(res.Corrupt) == 0 || res.Corrupt[0].AlsoIn != p {
		t.Fatalf("tolerant: %v %+v", err, res)
	}
}

func appendFile(t testing.TB, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func rows(t testing.TB, ids ...string) string {
	t.Helper()
	var sb strings.Builder
	for _, id := range ids {
		b, err := encodeIntent(testIntent(id, "", "in"))
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String()
}

// TestStrictScan: the first bad line fails the scan with its position and
// digest; the tolerant scan returns every bad line and goes on.
func TestStrictScan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	good := rows(t, "a")
	bad1 := "not json"
	bad2 := `{"format":"cruxprov.receipt/v2","phase":"intent"}`
	dup := strings.TrimSuffix(rows(t, "a"), "\n")
	content := good + bad1 + "\n" + rows(t, "b") + bad2 + "\n" + dup + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Scan(context.Background(), []string{path}, ScanOptions{})
	var ce *CorruptError
	if !errors.As(err, &ce) || refusal.CodeOf(err) != refusal.LedgerCorrupt || !errors.Is(ce, refusal.LedgerCorrupt) {
		t.Fatalf("got %v", err)
	}
	if ce.Line != 2 || ce.Offset != int64(len(good)) || ce.Length != int64(len(bad1)) || ce.SHA256 != dg(bad1) || string(ce.Bytes) != bad1 {
		t.Fatalf("corrupt line %+v", ce.CorruptLine)
	}
	res, err := Scan(context.Background(), []string{path}, ScanOptions{TolerateCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Corrupt) != 3 || len(res.Attempts) != 2 {
		t.Fatalf("tolerant %+v", res)
	}
	for i, want := range []string{"alone on its line", "unknown major", "a second intent"} {
		if !strings.Contains(res.Corrupt[i].Reason, want) {
			t.Errorf("line %d: %q, want %q", res.Corrupt[i].Line, res.Corrupt[i].Reason, want)
		}
	}
	// A writer refuses the corrupt ledger before writing anything.
	if _, err := Open(context.Background(), path, Options{}); !errors.As(err, &ce) {
		t.Fatalf("Open of a corrupt ledger: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != content {
		t.Fatal("Open changed a corrupt ledger")
	}
}

// TestRepair: the torn tails a writer meets, each repaired before its
// first append.
func TestRepair(t *testing.T) {
	complete := strings.TrimSuffix(rows(t, "c"), "\n")
	tests := []struct {
		name    string
		prefix  string
		tail    string
		torn    bool // quarantined (else terminated or nothing)
		wantErr bool
	}{
		{"clean", rows(t, "a"), "", false, false},
		{"empty file", "", "", false, false},
		{"complete record without newline", rows(t, "a"), complete, false, false},
		{"only a complete record", "", complete, false, false},
		{"half a record", rows(t, "a"), complete[:len(complete)/2], true, false},
		{"only a fragment", "", complete[:10], true, false},
		{"garbage bytes", rows(t, "a"), "\x00\xff\xfe{", true, false},
		{"record with a trailing space", rows(t, "a"), complete + " ", true, false},
		{"record of an unknown major", rows(t, "a"), strings.Replace(complete, "receipt/v1", "receipt/v7", 1), true, false},
		{"too long a fragment", rows(t, "a"), strings.Repeat("x", maxFragment+1), false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			os.WriteFile(path, []byte(tc.prefix+tc.tail), 0o600)
			l, err := Open(context.Background(), path, Options{})
			if tc.wantErr {
				if !errors.Is(err, refusal.LedgerCorrupt) {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d := begin(t, l, testIntent("new", "", "in"))
			res := scanT(t, path)
			if len(res.Tails) != 0 {
				t.Fatalf("tails %+v", res.Tails)
			}
			if got := len(res.Torn); got != map[bool]int{true: 1}[tc.torn] {
				t.Fatalf("%d torn rows", got)
			}
			if tc.torn {
				tr := res.Torn[0]
				if string(tr.Bytes) != tc.tail || tr.SHA256 != dg(tc.tail) || tr.Offset != int64(len(tc.prefix)) {
					t.Fatalf("torn %+v", tr)
				}
			}
			last := res.Attempts[len(res.Attempts)-1]
			if last.Intent.AttemptID != d.AttemptID {
				t.Fatalf("last attempt %+v", last)
			}
			for _, p := range []string{".lock", ".repair", ".repair.tmp"} {
				if _, err := os.Stat(path + p); err == nil {
					t.Errorf("%s left behind", p)
				}
			}
		})
	}
}

// TestJournalRecovery: a crash during a quarantine leaves the journal and
// the ledger in one of three states; the next writer finishes each.
func TestJournalRecovery(t *testing.T) {
	prefix := rows(t, "a")
	frag := strings.TrimSuffix(rows(t, "b"), "\n")[:30]
	torn := encodeTorn(int64(len(prefix)), []byte(frag), t0)
	j := `{"format":"cruxprov.receipt-repair/v1","offset":` + itoa(len(prefix)) + `,"row":` + quote(string(torn[:len(torn)-1])) + "}\n"
	tests := []struct {
		name    string
		ledger  string
		journal string
		code    refusal.Code
	}{
		{"journal written, nothing overwritten", prefix + frag, j, ""},
		{"half overwritten", prefix + string(torn[:len(torn)/2]), j, ""},
		{"overwritten, journal not removed", prefix + string(torn), j, ""},
		{"overwritten and rows appended, journal not removed", prefix + string(torn) + rows(t, "z"), j, ""},
		{"journal unreadable", prefix + frag, "{", refusal.LedgerCorrupt},
		{"rows after an unfinished repair", prefix + frag + "\n" + rows(t, "z"), j, refusal.LedgerCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.jsonl")
			os.WriteFile(path, []byte(tc.ledger), 0o600)
			os.WriteFile(path+".repair", []byte(tc.journal), 0o600)
			// The scan, a health check's, says what the writer will: a
			// journal it finishes is pending, one it refuses is refused
			// with the writer's words (the scan said all was well), and
			// a tolerant scan reports that one with its reason.
			res, serr := Scan(context.Background(), []string{path}, ScanOptions{})
			tres, terr := Scan(context.Background(), []string{path}, ScanOptions{TolerateCorrupt: true})
			if terr != nil || len(tres.Repairs) != 1 || tres.Repairs[0].Journal != path+".repair" || (tres.Repairs[0].Reason != "") != (tc.code != "") {
				t.Fatalf("tolerant scan: %v %+v", terr, tres)
			}
			l, err := Open(context.Background(), path, Options{})
			if tc.code != "" {
				if !errors.Is(err, tc.code) {
					t.Fatalf("got %v", err)
				}
				if serr == nil || serr.Error() != err.Error() || refusal.RemedyOf(serr) == nil {
					t.Fatalf("the scan said %v (%+v), the writer %v", serr, res, err)
				}
				if _, err := os.Stat(path + ".repair"); err != nil {
					t.Fatal("the journal of a refused recovery is gone")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if serr != nil || len(res.Repairs) != 1 || res.Repairs[0].Offset != int64(len(prefix)) || res.Repairs[0].Reason != "" {
				t.Fatalf("the scan of a repair the writer finishes: %v %+v", serr, res)
			}
			l.Close()
			res = scanT(t, path)
			if len(res.Repairs) != 0 {
				t.Fatalf("repairs after the writer's: %+v", res.Repairs)
			}
			if len(res.Torn) != 1 || string(res.Torn[0].Bytes) != frag {
				t.Fatalf("torn %+v", res.Torn)
			}
			if _, err := os.Stat(path + ".repair"); err == nil {
				t.Fatal("journal left behind")
			}
		})
	}
}

// TestRepairLock: a repair lock that a live writer holds (its flock; here
// a writer of the ledger file that was renamed aside, the only one that
// can repair beside this one) makes the writer wait, here until its
// context ends; whatever its mtime, one that no one holds is taken over
// at once.
func TestRepairLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	os.WriteFile(path, []byte(rows(t, "a")+"{frag"), 0o600)
	os.WriteFile(path+".lock", []byte("1\n"), 0o600)
	holder, err := os.Open(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(path+".lock", old, old) // however old
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, refusal.LedgerWriteFailed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a live lock: %v", err)
	}
	holder.Close()
	for round, mtime := range []time.Time{time.Now(), time.Now().Add(time.Hour)} {
		os.Chtimes(path+".lock", mtime, mtime)
		// Every call is bounded: the old rule waited for such a lock for
		// the TTL (30 s), or until its mtime plus the TTL.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		l, err := Open(ctx, path, Options{})
		cancel()
		if err != nil {
			t.Fatalf("with an unheld lock of mtime %v: %v", mtime, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("an unheld lock cost %v", d)
		}
		l.Close()
		if _, err := os.Stat(path + ".lock"); err == nil {
			t.Fatal("lock left behind")
		}
		if res := scanT(t, path); len(res.Torn) != round+1 {
			t.Fatalf("torn %+v", res.Torn)
		}
		// Tear the tail again for the next round.
		appendFile(t, path, "{frag")
		os.WriteFile(path+".lock", []byte("1\n"), 0o600)
	}
	// A clean ledger needs no repair lock at all.
	path = filepath.Join(t.TempDir(), "clean.jsonl")
	os.WriteFile(path, []byte(rows(t, "a")), 0o600)
	os.WriteFile(path+".lock", []byte("1\n"), 0o600)
	l := openT(t, path)
	begin(t, l, testIntent("", "", "in"))
}

// TestScanTail: an unterminated tail is pending, not corruption; a
// complete record without its newline is read as a row.
func TestScanTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	complete := strings.TrimSuffix(rows(t, "c"), "\n")
	os.WriteFile(path, []byte(rows(t, "a")+"{frag"), 0o600)
	if res := scanT(t, path); len(res.Tails) != 1 || string(res.Tails[0].Bytes) != "{frag" || len(res.Attempts) != 1 {
		t.Fatalf("scan %+v", res)
	}
	os.WriteFile(path, []byte(rows(t, "a")+complete), 0o600)
	if res := scanT(t, path); len(res.Tails) != 0 || len(res.Attempts) != 2 {
		t.Fatalf("scan %+v", res)
	}
}

func TestDefaultPath(t *testing.T) {
	tests := []struct{ host, want string }{
		{"exec-1.example", "/s/cruxprov/receipts/exec-1.example-1000.jsonl"},
		{"", "/s/cruxprov/receipts/localhost-1000.jsonl"},
		{"../../etc", "/s/cruxprov/receipts/.._.._etc-1000.jsonl"},
		{"..", "/s/cruxprov/receipts/__-1000.jsonl"},
		{"h ö", "/s/cruxprov/receipts/h___-1000.jsonl"},
	}
	for _, tc := range tests {
		t.Run(tc.host, func(t *testing.T) {
			if got := DefaultPath("/s", tc.host, 1000); got != tc.want {
				t.Fatalf("got %s", got)
			}
		})
	}
}

// TestDefaultPathRelativeStateHome: a state home that is not an
// absolute path (an unset XDG_STATE_HOME passed as found, a relative
// one the XDG spec says to ignore) gives no path, which Open refuses
// ledger_write_failed; it gave a ledger under the working directory.
func TestDefaultPathRelativeStateHome(t *testing.T) {
	for _, sh := range []string{"", "state", "./s", "../s"} {
		p := DefaultPath(sh, "h", 1000)
		if p != "" {
			t.Errorf("DefaultPath(%q): %q, want \"\"", sh, p)
		}
		if _, err := Open(context.Background(), p, Options{}); refusal.CodeOf(err) != refusal.LedgerWriteFailed {
			t.Errorf("Open of DefaultPath(%q): %v, want ledger_write_failed", sh, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestShortWriteLeavesNoRow: an intent whose write is cut short one byte
// before its newline (a full disk; here the file size limit, in a child
// process so that go test's own files do not meet it) is refused, and the
// part that landed is cut off: the ledger reads as before, with no orphan.
// It stayed, and the next Open read it as the intent of an attempt that
// never spawned.
func TestShortWriteLeavesNoRow(t *testing.T) {
	if os.Getenv("CRUXPROV_TEST_FSIZE") == "" {
		asuser.RunChild(t, t.Name(), "CRUXPROV_TEST_FSIZE=1")
		return
	}
	dir := t.TempDir()
	now := func() time.Time { return t0 }
	open := func(path string) *Ledger {
		l, err := Open(context.Background(), path, Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	in := testIntent("0123456789abcdef0123456789abcdef", "k", "in")
	// The row's length, from a ledger of its own.
	scratch := filepath.Join(dir, "scratch.jsonl")
	ls := open(scratch)
	fi0, _ := os.Stat(scratch)
	begin(t, ls, in)
	fi1, _ := os.Stat(scratch)
	row := fi1.Size() - fi0.Size()

	path := filepath.Join(dir, "l.jsonl")
	l := open(path)
	d := begin(t, l, testIntent("", "", "first"))
	finish(t, l, testOutcome(d.AttemptID, StatusOK))
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	restore := asuser.LimitFileSize(t, uint64(int64(len(before))+row-1))
	_, err = l.Begin(context.Background(), in)
	restore()
	if !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("Begin past the file size limit: %v", err)
	}
	// The reason, not "short write": what the executor is told to do
	// (free space, a quota, the limit) depends on it.
	if !errors.Is(err, syscall.EFBIG) {
		t.Errorf("Begin past the file size limit does not say why: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("the ledger kept %d bytes of the refused intent", len(after)-len(before))
	}
	if res := scanT(t, path); len(res.Orphans) != 0 || len(res.Attempts) != 1 {
		t.Fatalf("scan after the refusal: %d attempts, %d orphans", len(res.Attempts), len(res.Orphans))
	}
	// The ledger still takes the next intent.
	begin(t, l, testIntent("", "", "next"))
}

// TestFIFOsDoNotHang: a FIFO named as a ledger to scan, or put at a
// ledger's repair journal, is refused at once. Both hung in open(2) until
// a writer came (receipts list|scan|show; every run's Open), and SIGTERM
// did not end them: the blocked read never returned.
func TestFIFOsDoNotHang(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testdir.Returns(t, "Scan of a FIFO", func() error {
		_, err := Scan(context.Background(), []string{fifo}, ScanOptions{})
		return err
	}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Scan of a FIFO: %v", err)
	}

	path := filepath.Join(dir, "l.jsonl")
	l, err := Open(context.Background(), path, Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	begin(t, l, testIntent("", "", "first"))
	l.Close()
	if err := syscall.Mkfifo(path+".repair", 0o600); err != nil {
		t.Fatal(err)
	}
	err = testdir.Returns(t, "Open with a FIFO at the repair journal", func() error {
		l, err := Open(context.Background(), path, Options{})
		if err == nil {
			l.Close()
		}
		return err
	})
	if !errors.Is(err, refusal.LedgerCorrupt) || !strings.Contains(err.Error(), "move the ledger and the journal aside together") {
		t.Errorf("Open with a FIFO at the repair journal: %v", err)
	}

	// A FIFO at the repair lock, met when a torn tail is to be repaired.
	os.Remove(path + ".repair")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"torn`)
	f.Close()
	if err := syscall.Mkfifo(path+".lock", 0o600); err != nil {
		t.Fatal(err)
	}
	err = testdir.Returns(t, "Open with a FIFO at the repair lock", func() error {
		l, err := Open(context.Background(), path, Options{})
		if err == nil {
			_, err = l.Begin(context.Background(), testIntent("", "", "second"))
			l.Close()
		}
		return err
	})
	if !errors.Is(err, refusal.LedgerWriteFailed) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a repair with a FIFO at the repair lock: %v", err)
	}
}

// TestScanRefusesWhatTheWriterRefuses: a torn tail whose repair lock the
// writer cannot look at (here a symbolic link, as another user's lock it
// cannot open) refuses every run ledger_write_failed; the scan said all
// was well. It says what the writer says; with no tail to repair the
// lock is not looked at, by either.
func TestScanRefusesWhatTheWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "l.jsonl")
	os.WriteFile(path, []byte(rows(t, "a")+"{frag"), 0o600)
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), path+".lock"); err != nil {
		t.Fatal(err)
	}
	_, serr := Scan(context.Background(), []string{path}, ScanOptions{TolerateCorrupt: true})
	_, err := Open(context.Background(), path, Options{})
	if !errors.Is(err, refusal.LedgerWriteFailed) || serr == nil || serr.Error() != err.Error() {
		t.Fatalf("the scan said %v, the writer %v", serr, err)
	}
	os.WriteFile(path, []byte(rows(t, "a")), 0o600)
	scanT(t, path)
	openT(t, path)
}

// TestCreateAtBegin: with CreateAtBegin, Open leaves a ledger that does
// not exist (and its directories) uncreated until the first Begin, so a
// caller that refuses before it (cruxprov run, at the pin) leaves
// nothing behind; Open still refuses a path whose directory cannot be
// made; a ledger that exists is read and repaired by Open as always.
func TestCreateAtBegin(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "receipts", "l.jsonl")
	l, err := Open(ctx, path, Options{CreateAtBegin: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, testOutcome("nope", StatusOK)); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("Finish without an intent: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open made the ledger's directories: %v", err)
	}
	begin(t, l, testIntent("c-1", "k", "in"))
	if err := l.Finish(ctx, testOutcome("c-1", StatusOK)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the directory Begin made: %v %v", st, err)
	}
	if res := scanT(t, path); len(res.Attempts) != 1 || res.Attempts[0].Outcome == nil {
		t.Fatalf("%+v", res)
	}
	// Closed before it was created: nothing is created after.
	other := filepath.Join(dir, "other.jsonl")
	l, err = Open(ctx, other, Options{CreateAtBegin: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Begin(ctx, testIntent("c-2", "", "in")); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("Begin after Close: %v", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a closed Ledger created its file: %v", err)
	}
	// A directory that cannot be made is refused by Open, as before.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := Open(ctx, filepath.Join(file, "receipts", "l.jsonl"), Options{CreateAtBegin: true}); !errors.Is(err, refusal.LedgerWriteFailed) {
		t.Fatalf("under a file: %v", err)
	}
	// An existing ledger is opened (and its tail repaired) by Open.
	appendFile(t, path, "{frag")
	l, err = Open(ctx, path, Options{CreateAtBegin: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if res := scanT(t, path); len(res.Torn) != 1 || len(res.Tails) != 0 {
		t.Fatalf("not repaired by Open: %+v", res)
	}
	// The key the replay finds is the one the first Ledger wrote.
	l = openT(t, path)
	if d := begin(t, l, testIntent("c-3", "k", "in")); d.Replay == nil {
		t.Fatalf("no replay: %+v", d)
	}
}

// TestScanRefusesALongTailAsTheWriterDoes: an unterminated tail longer
// than a torn row holds (MaxRow) is refused ledger_corrupt by the writer,
// which cannot quarantine it, and the scan refuses it the same, word for
// word (a tolerant scan lists it as a corrupt line). The scan listed it
// among the tails "the next writer quarantines", exiting 0, while every
// run was refused.
func TestScanRefusesALongTailAsTheWriterDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.jsonl")
	tail := "{" + strings.Repeat("x", MaxRow+9)
	if err := os.WriteFile(path, []byte(rows(t, "a")+tail), 0o600); err != nil {
		t.Fatal(err)
	}
	_, serr := Scan(context.Background(), []string{path}, ScanOptions{})
	_, err := Open(context.Background(), path, Options{})
	var ce *CorruptError
	if !errors.Is(err, refusal.LedgerCorrupt) || serr == nil || serr.Error() != err.Error() || !errors.As(serr, &ce) || ce.Length != int64(len(tail)) {
		t.Fatalf("the scan said %v, the writer %v", serr, err)
	}
	res, err := Scan(context.Background(), []string{path}, ScanOptions{TolerateCorrupt: true})
	if err != nil || len(res.Corrupt) != 1 || len(res.Tails) != 0 || len(res.Corrupt[0].Bytes) != len(tail) {
		t.Fatalf("tolerant: %v %+v", err, res)
	}
}

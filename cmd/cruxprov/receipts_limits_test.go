package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// replayOf is a replayed outcome's replay_of (the container run's), "" for a run.
func replayOf(replayed bool) string {
	if replayed {
		return "att_container"
	}
	return ""
}

// TestReceiptsShowLimits: a run's receipt that names limits it went
// without reads as such in receipts list and show; the container's
// --unenforced-limits is named only for a container run (a local run
// without its namespaces was not asked to go without them).
func TestReceiptsShowLimits(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, run := range []struct {
		id, backend string
		lost        []string
		replayed    bool
	}{{"att_local", "local", []string{invoke.LimitNamespaces}, false}, {"att_container", "container", []string{"memory", "cpus", "pids"}, false},
		{"att_replay", "container", []string{"memory", "cpus", "pids"}, true}} {
		in := receipts.Intent{AttemptID: run.id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: run.backend, Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d, Unenforced: run.lost}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: run.id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now(), Replayed: run.replayed, ReplayOf: replayOf(run.replayed)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if r := cruxprov(t, "receipts", "list", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ok (no namespaces limits)") || !strings.Contains(r.stdout, "ok (no memory, cpus, pids limits)") {
		t.Errorf("receipts list: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_local", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ran without the namespaces limits\n") {
		t.Errorf("receipts show of the local run: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_container", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ran without the memory, cpus, pids limits (--unenforced-limits)") {
		t.Errorf("receipts show of the container run: %+v", r)
	}
	// A replay ran nothing, so no limit went unheld: its row says
	// replayed and nothing of limits.
	if r := cruxprov(t, "receipts", "list", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "ok (replayed)  ") {
		t.Errorf("receipts list of a replay: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_replay", "--ledger", ledger); r.code != 0 || strings.Contains(r.stdout, "ran without") {
		t.Errorf("receipts show of a replay: %+v", r)
	}
}

// TestReceiptsNoExitStatus: a run with no exit status (refused before
// anything ran: the ledger's -1) reads as such in receipts list and show,
// not as an exit code of -1; --json keeps the ledger's -1, and a run's
// real exit code is shown as it is.
func TestReceiptsNoExitStatus(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, run := range []struct {
		id, status string
		code       int
	}{{"att_refused", receipts.StatusRefused, -1}, {"att_error", receipts.StatusError, 3}} {
		in := receipts.Intent{AttemptID: run.id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: run.id, Status: run.status, ExitCode: run.code, ErrorCode: "env_drift", EndedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	r := cruxprov(t, "receipts", "list", "--ledger", ledger)
	if r.code != 0 || !strings.Contains(r.stdout, "refused  -  ") || !strings.Contains(r.stdout, "error    3  ") || strings.Contains(r.stdout, " -1 ") {
		t.Errorf("receipts list: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_refused", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "refused, no exit status, after ") {
		t.Errorf("receipts show of the refused run: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_error", "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, "error, exit 3, after ") {
		t.Errorf("receipts show of the failed run: %+v", r)
	}
	r = cruxprov(t, "receipts", "list", "--ledger", ledger, "--json")
	var doc struct {
		Attempts []struct {
			Outcome struct {
				ExitCode int `json:"exit_code"`
			} `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Attempts) != 2 || doc.Attempts[0].Outcome.ExitCode+doc.Attempts[1].Outcome.ExitCode != 2 {
		t.Errorf("receipts list --json: %v %+v", err, r)
	}
}

// TestReceiptsStoppedExitZero: a run the executor stopped (its timeout,
// or the caller's cancel) whose harness caught the SIGTERM and exited 0
// keeps exit_code 0 in its receipt (docs/receipts.md, "A timeout's exit
// code"), and receipts list's EXIT column showed that bare 0 beside it, as
// it shows a run that ended well. It says "0 (after SIGTERM)", a
// cancelled run's STATUS says cancelled, show says the same, a run a
// signal killed keeps its 128+N, and --json keeps the 0.
func TestReceiptsStoppedExitZero(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, run := range []struct {
		id, status, code string
		exit             int
	}{{"att_timeout", receipts.StatusTimeout, invoke.CodeTimeout, 0}, {"att_cancelled", receipts.StatusError, invoke.CodeCancelled, 0},
		{"att_killed", receipts.StatusTimeout, invoke.CodeTimeout, 137}, {"att_ok", receipts.StatusOK, "", 0}} {
		in := receipts.Intent{AttemptID: run.id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		o := receipts.Outcome{AttemptID: run.id, Status: run.status, ExitCode: run.exit, ErrorCode: run.code, ErrorMessage: run.code, EndedAt: time.Now()}
		if run.status == receipts.StatusOK {
			o.ResultDigest = d
		}
		if err := l.Finish(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	r := cruxprov(t, "receipts", "list", "--ledger", ledger)
	rows := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			rows[f[1]] = line
		}
	}
	for id, want := range map[string]string{
		"att_timeout":   "  timeout            0 (after SIGTERM)  ",
		"att_cancelled": "  error (cancelled)  0 (after SIGTERM)  ",
		"att_killed":    "  timeout            137                ",
		"att_ok":        "  ok                 0                  ",
	} {
		if r.code != 0 || !strings.Contains(rows[id], want) {
			t.Errorf("receipts list: the row of %s is %q, want it to hold %q (all: %+v)", id, rows[id], want, r)
		}
	}
	for id, want := range map[string]string{"att_timeout": "timeout, exit 0 (after SIGTERM), after ", "att_cancelled": "error, exit 0 (after SIGTERM), after ", "att_killed": "timeout, exit 137, after "} {
		if r := cruxprov(t, "receipts", "show", id, "--ledger", ledger); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("receipts show %s: want %q in %+v", id, want, r)
		}
	}
	r = cruxprov(t, "receipts", "list", "--ledger", ledger, "--json")
	var doc struct {
		Attempts []struct {
			Outcome struct {
				ExitCode int `json:"exit_code"`
			} `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Attempts) != 4 || doc.Attempts[0].Outcome.ExitCode != 0 || doc.Attempts[1].Outcome.ExitCode != 0 {
		t.Errorf("receipts list --json: %v %+v", err, r)
	}
}

// TestReceiptsScanSummary: the text summary of receipts scan counts what
// its --json lists, an outcome whose intent is in no scanned ledger
// included (it was left out, so such an outcome showed nowhere in text).
func TestReceiptsScanSummary(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, id := range []string{"att_a", "att_b"} {
		in := receipts.Intent{AttemptID: id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	// Without att_a's intent (its first line): its outcome has none.
	if err := os.WriteFile(ledger, b[bytes.IndexByte(b, '\n')+1:], 0o600); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if want := "1 attempt, 0 orphaned intents, 1 outcome without its intent, 0 torn rows, 0 corrupt lines, 0 unterminated tails in 1 ledger\n"; r.code != 0 || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("receipts scan: %+v, want a summary %q", r, want)
	}
	var doc struct{ Unmatched []any }
	if r := cruxprov(t, "receipts", "scan", "--ledger", ledger, "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Unmatched) != 1 {
		t.Errorf("receipts scan --json: %+v", r)
	}
}

// TestReceiptsRunningIsNotOrphan: an attempt under an idempotency key
// whose writer holds the key's lock is running, and list and show say
// RUNNING; once the writer is gone (the kernel drops the lock) it is an
// orphan. A running attempt was listed ORPHAN, which the scan's help said
// to reconcile as a crash, where Begin refused a duplicate of it as still
// running.
func TestReceiptsRunningIsNotOrphan(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	for _, id := range []string{"att_keyed", "att_unkeyed"} {
		key := ""
		if id == "att_keyed" {
			key = "k1"
		}
		in := receipts.Intent{AttemptID: id, IdempotencyKey: key, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	status := func(id string) string {
		t.Helper()
		r := cruxprov(t, "receipts", "list", "--ledger", ledger)
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[1] == id {
				return f[4]
			}
		}
		t.Fatalf("no %s in %+v", id, r)
		return ""
	}
	if got := status("att_keyed"); got != "RUNNING" {
		t.Errorf("a keyed attempt whose writer runs: %s, want RUNNING", got)
	}
	if got := status("att_unkeyed"); got != "ORPHAN" {
		t.Errorf("an unkeyed attempt: %s, want ORPHAN (no lock tells it apart)", got)
	}
	if r := cruxprov(t, "receipts", "show", "att_keyed", "--ledger", ledger); !strings.Contains(r.stdout, "RUNNING: no outcome yet") {
		t.Errorf("show of a running attempt: %+v", r)
	}
	// --status orphan leaves the running one out; --status running has it.
	if r := cruxprov(t, "receipts", "list", "--ledger", ledger, "--status", "orphan"); strings.Contains(r.stdout, "att_keyed") || !strings.Contains(r.stdout, "att_unkeyed") {
		t.Errorf("list --status orphan: %+v", r)
	}
	if r := cruxprov(t, "receipts", "list", "--ledger", ledger, "--status", "running"); !strings.Contains(r.stdout, "att_keyed") || strings.Contains(r.stdout, "att_unkeyed") {
		t.Errorf("list --status running: %+v", r)
	}
	l.Close()
	if got := status("att_keyed"); got != "ORPHAN" {
		t.Errorf("a keyed attempt whose writer is gone: %s, want ORPHAN", got)
	}
	// show says of the keyed orphan that it is not running (nobody holds
	// its key's lock): it said "or the run is still going" of both.
	if r := cruxprov(t, "receipts", "show", "att_keyed", "--ledger", ledger); !strings.Contains(r.stdout, "(nobody holds its idempotency key's lock, so it is not running)") || strings.Contains(r.stdout, "still going") {
		t.Errorf("show of a keyed orphan: %+v", r)
	}
	if r := cruxprov(t, "receipts", "show", "att_unkeyed", "--ledger", ledger); !strings.Contains(r.stdout, "or the run is still going: a run without an idempotency key holds no lock that tells") {
		t.Errorf("show of an unkeyed orphan: %+v", r)
	}
}

// TestRunOpensTheLedgerBeforeVerifying: run opens its ledger before it
// verifies the pin, so that what it verified is what it spawns without
// the ledger's read in between (Open reads a whole ledger whose
// checkpoint is missing: seconds on a large one). Seen from outside: a
// ledger that cannot be opened is refused before a pin refused itself.
func TestRunOpensTheLedgerBeforeVerifying(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "l.jsonl")
	if err := os.WriteFile(ledger, []byte("this is not a receipt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte("{}"), 0o644)
	r := cruxprov(t, "--home", filepath.Join(dir, "home"), "run", "acme-nope", "echo", "--input", in, "--ledger", ledger)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: ledger_corrupt") {
		t.Errorf("a corrupt ledger and a provider with no pin: %+v", r)
	}
}

// TestReceiptsScanSeesTheRepairJournal: a repair journal the writer
// refuses (here one a killed writer left unreadable as a journal) refused
// every run ledger_corrupt while receipts scan, an executor's health
// check, exited 0. The scan now refuses it with the run's line and its
// remedy; a tolerant scan lists it with the reason; and a journal the next
// run finishes is reported as such, exit 0.
func TestReceiptsScanSeesTheRepairJournal(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "r.jsonl")
	if err := os.WriteFile(ledger, []byte(`{"frag`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledger+".repair", []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte("{}"), 0o644)
	run := cruxprov(t, "--home", filepath.Join(dir, "home"), "run", "acme-nope", "echo", "--input", in, "--ledger", ledger)
	scan := cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if run.code != exitRefused || scan.code != exitRefused || !strings.HasPrefix(scan.stderr, "refused: ledger_corrupt: repair journal "+ledger+".repair") ||
		!strings.Contains(run.stderr, scan.stderr) {
		t.Errorf("run: %+v\nscan: %+v", run, scan)
	}
	var doc struct {
		Repairs []receipts.Repair `json:"repairs"`
	}
	r := cruxprov(t, "receipts", "scan", "--ledger", ledger, "--tolerate-corrupt", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Repairs) != 1 || !strings.Contains(doc.Repairs[0].Reason, "is not a cruxprov.receipt-repair/v1 document") {
		t.Errorf("receipts scan --tolerate-corrupt --json: %+v", r)
	}
	// A journal the next writer finishes (written, nothing overwritten yet).
	os.Remove(ledger + ".repair")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, _ := os.ReadFile(ledger)
	row := strings.TrimSuffix(string(b), "\n")
	j, _ := json.Marshal(map[string]any{"format": "cruxprov.receipt-repair/v1", "offset": 0, "row": row})
	os.WriteFile(ledger, []byte(`{"frag`), 0o600)
	os.WriteFile(ledger+".repair", j, 0o600)
	r = cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if r.code != 0 || !strings.Contains(r.stdout, "repair journal "+ledger+".repair: a repair a writer was killed in; the next run finishes it\n") ||
		!strings.HasSuffix(r.stdout, "1 unterminated tail, 1 unfinished repair in 1 ledger\n") {
		t.Errorf("receipts scan of a repair to finish: %+v", r)
	}
}

// TestRunRefusedAtThePinLeavesNoLedger: a run refused at its pin (here a
// provider with no pin) created the default ledger file and its
// directories under $XDG_STATE_HOME, since the ledger is opened before the
// verify: a refused run left behind what was not there. It is created at
// the intent now; a ledger that exists is still opened (and refused
// when corrupt) before the pin, TestRunOpensTheLedgerBeforeVerifying.
func TestRunRefusedAtThePinLeavesNoLedger(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte("{}"), 0o644)
	state := filepath.Join(dir, "state")
	for _, extra := range [][]string{nil, {"--ledger", filepath.Join(dir, "ledgers", "l.jsonl")}, {"--state-dir", filepath.Join(state, "executor")}} {
		args := append([]string{"--home", filepath.Join(dir, "home"), "run", "acme-nope", "echo", "--input", in}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		r := runCmd(t, cmd)
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_unapproved") {
			t.Errorf("%v: %+v", extra, r)
		}
		for _, p := range []string{state, filepath.Join(dir, "ledgers")} {
			if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v: a run refused at its pin left %s (%v)", extra, p, err)
			}
		}
	}
}

// TestReceiptsShowsRowsEscaped: a ledger is not trusted text (a provider
// run without the sandbox can append to it), and receipts list and show
// printed an intent's provider, entrypoint, backend, platform and tool as
// they were: a terminal's escapes there acted on the operator's terminal.
// They are shown escaped, as the stderr tail and the error already were.
func TestReceiptsShowsRowsEscaped(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	const esc = "\x1b]0;pwned\x07\x1b[2J"
	in := receipts.Intent{AttemptID: "att_esc", Provider: "acme" + esc, Entrypoint: "echo" + esc, SealDigest: d,
		Backend: "local" + esc, Platform: "linux" + esc, ProtocolVersion: 1, Tool: "cruxprov" + esc, Unenforced: []string{"memory" + esc},
		InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, args := range [][]string{{"receipts", "list", "--ledger", ledger}, {"receipts", "show", "att_esc", "--ledger", ledger}} {
		r := cruxprov(t, args...)
		if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\x07") || !strings.Contains(r.stdout, `acme\x1b]0;pwned\x07\x1b[2J`) {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestReceiptsScanOfAnUnwritableLedger: the executor's own ledger made
// read-only (its mode here; a read-only mount or an immutable attribute
// alike) refuses every run ledger_write_failed, and receipts scan, its
// health check, said all was well. It refuses as run does; a ledger named
// with --ledger may be an archive, read-only on purpose, and is read as
// before. (As root, run as uid 65534: root ignores the mode.)
func TestReceiptsScanOfAnUnwritableLedger(t *testing.T) {
	uid, base, exe := os.Getuid(), t.TempDir(), bin
	run := func(args ...string) result { return cruxprov(t, args...) }
	if uid == 0 {
		base, exe = nobodyBase(t, "cruxprov-scan-ro-", "")
		uid = 65534
		run = func(args ...string) result { return asUser(t, exe, "/nonexistent", args...) }
	}
	state := filepath.Join(base, "state")
	host, _ := os.Hostname()
	ledger := filepath.Join(state, "receipts", filepath.Base(receipts.DefaultPath(state, host, uid)))
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if os.Getuid() == 0 {
		chownTree(t, base)
	}
	if r := run("receipts", "scan", "--state-dir", state); r.code != 0 {
		t.Fatalf("a writable ledger: %+v", r)
	}
	os.Chmod(ledger, 0o400)
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte("{}"), 0o644)
	r := run("receipts", "scan", "--state-dir", state)
	ran := run("run", "acme-nope", "echo", "--input", in, "--state-dir", state)
	// Both end with the same advice, this user's own ledger made
	// writable (grant_write, TestLedgerOwnReadOnlyAdvisesChmod).
	words, advised, _ := strings.Cut(strings.TrimSpace(r.stderr), "; to fix: ")
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: cannot open receipts ledger "+ledger+": ") ||
		ran.code != exitRefused || !strings.Contains(ran.stderr, words) || advised != "chmod u+w "+ledger || !strings.HasSuffix(strings.TrimSpace(ran.stderr), "; to fix: "+advised) {
		t.Errorf("scan: %+v\nrun: %+v", r, ran)
	}
	// It is read, exiting 0, and what a run given it would meet is said
	// (TestReceiptsScanWarnsOfAFullFileSystem).
	if r := run("receipts", "scan", "--ledger", ledger); r.code != 0 || !strings.HasPrefix(r.stderr, "warning: receipts ledger "+ledger+" is not writable by this user: a run given --ledger "+ledger+" is refused ledger_write_failed (") {
		t.Errorf("a read-only ledger named: %+v", r)
	}
	// Its key locks, which every keyed run opens for writing, this user
	// cannot write (left 0400 here; by root, say, running with this
	// user's state directory). receipts.TestWritableJudgesTheKeyLocks
	// shows a keyed Begin refused by what Writable refuses.
	os.Chmod(ledger, 0o600)
	os.WriteFile(ledger+".inflight", nil, 0o400)
	if os.Getuid() == 0 {
		chownTree(t, base)
	}
	r = run("receipts", "scan", "--state-dir", state)
	// What to do names the file: the ledger and its directory are
	// writable, and the advice to make them so was what scan said.
	// (The words are receipts', which a Go executor reads too; said once.)
	fix := "permission denied; make it writable by this user (chmod u+w, or chown it to this user)"
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: cannot open the in-flight lock file "+ledger+".inflight") ||
		strings.Count(r.stderr, fix) != 1 || strings.Contains(r.stderr, "make the ledger and its directory writable") {
		t.Errorf("key locks: scan: %+v", r)
	}
	// Named with --ledger, the warning says whose runs the key locks
	// refuse: a run with an idempotency key (one without takes the
	// ledger as it is; it said "a run given --ledger … is refused").
	if r := run("receipts", "scan", "--ledger", ledger); r.code != 0 || !strings.HasPrefix(r.stderr, "warning: receipts ledger "+ledger+" is not writable by this user: a run with an idempotency key given --ledger "+ledger+" is refused ledger_write_failed (cannot open the in-flight lock file ") {
		t.Errorf("key locks, the ledger named: %+v", r)
	}
	// A directory or a symbolic link at its name, which no keyed run
	// made: the refusal said what failed and nothing of what to do.
	os.Remove(ledger + ".inflight")
	for _, make := range []func(p string) error{func(p string) error { return os.Mkdir(p, 0o700) }, func(p string) error { return os.Symlink(ledger, p) }} {
		if err := make(ledger + ".inflight"); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			chownTree(t, base)
		}
		r = run("receipts", "scan", "--state-dir", state)
		if r.code != exitRefused || !strings.Contains(r.stderr, "the in-flight lock file "+ledger+".inflight of receipts ledger "+ledger+" is ") ||
			strings.Count(r.stderr, "it is not the regular file a keyed run makes there: remove it, and the next keyed run makes it") != 1 {
			t.Errorf("key locks not a file: scan: %+v", r)
		}
		os.Remove(ledger + ".inflight")
	}
	// A state directory no run has made its ledger in yet, and no run
	// can (its mode 0555): the scan of a new executor exited 0.
	fresh := filepath.Join(base, "fresh")
	if err := os.Mkdir(fresh, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(fresh, 0o755) })
	if os.Getuid() == 0 {
		chownTree(t, base)
	}
	r = run("receipts", "scan", "--state-dir", fresh)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: ledger_write_failed: cannot create receipts ledger "+filepath.Join(fresh, "receipts")) {
		t.Errorf("a state directory no ledger can be made in: scan: %+v", r)
	}
}

// TestReceiptsScanListsWhatItFound: a corrupt ledger's refusal says to
// list its bad lines with a tolerant scan, and names that scan as the
// command to run; its text counted them ("1 corrupt line") and said
// nowhere which line, so only --json answered it. Each corrupt line,
// outcome without its intent, torn row and unterminated tail is now on a
// line of its own, where it is, before the counts.
func TestReceiptsScanListsWhatItFound(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	// A torn tail the writer quarantines at its first Begin, then one
	// receipt whose intent is taken out below.
	if err := os.WriteFile(ledger, []byte(`{"frag`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	in := receipts.Intent{AttemptID: "att_lost", Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
		Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
		InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: "att_lost", Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.SplitAfter(string(b), "\n") // torn row, intent, outcome, ""
	if len(rows) != 4 || !strings.Contains(rows[0], `"phase":"torn"`) {
		t.Fatalf("the ledger written: %q", b)
	}
	// Line 1 the torn row, line 2 the outcome, line 3 bad, then a tail.
	body := rows[0] + rows[2] + "not a receipt\n" + `{"tail`
	if err := os.WriteFile(ledger, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	strict := cruxprov(t, "receipts", "scan", "--ledger", ledger)
	if strict.code != exitRefused || !strings.Contains(strict.stderr, "list its bad lines with a tolerant scan") ||
		!strings.Contains(strict.stderr, "to fix: cruxprov receipts scan --tolerate-corrupt --ledger "+ledger) {
		t.Fatalf("strict scan: %+v", strict)
	}
	r := cruxprov(t, "receipts", "scan", "--tolerate-corrupt", "--ledger", ledger)
	off := len(rows[0]) + len(rows[2])
	for _, want := range []string{
		"corrupt line: " + ledger + ": line 3 at byte offset " + strconv.Itoa(off) + " (13 bytes, " + digest.Sum([]byte("not a receipt")).String() + "): ",
		"outcome without its intent: " + ledger + ": line 2 at byte offset " + strconv.Itoa(len(rows[0])) + ": attempt att_lost\n",
		"torn row: " + ledger + ": line 1: a fragment of 6 bytes (" + digest.Sum([]byte(`{"frag`)).String() + ") from byte offset 0, quarantined ",
		"unterminated tail: " + ledger + " at byte offset " + strconv.Itoa(off+14) + " (6 bytes, " + digest.Sum([]byte(`{"tail`)).String() + ")",
		"0 attempts, 0 orphaned intents, 1 outcome without its intent, 1 torn row, 1 corrupt line, 1 unterminated tail in 1 ledger\n",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("receipts scan --tolerate-corrupt does not say %q: %+v", want, r)
		}
	}
	// A ledger scanned with its copy: each row of the copy is a second
	// row of its attempt, whose reason names where the first is, once.
	sound := filepath.Join(filepath.Dir(ledger), "sound.jsonl")
	l, err = receipts.Open(context.Background(), sound, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in.AttemptID = "att_twice"
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, _ = os.ReadFile(sound)
	cp := sound + ".copy"
	os.WriteFile(cp, b, 0o600)
	r = cruxprov(t, "receipts", "scan", "--tolerate-corrupt", "--ledger", sound, "--ledger", cp)
	if want := "corrupt line: " + cp + ": line 1 at byte offset 0 (" + strconv.Itoa(len(b)-1) + " bytes, " + digest.Sum(b[:len(b)-1]).String() + "): a second intent for attempt att_twice (the first: " + sound + " line 1)\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("a ledger and its copy: want %q in %+v", want, r)
	}
}

// TestReceiptsLedgerNotAFile: a --ledger naming a directory (the state
// directory instead of the ledger in it) or a FIFO exited 1 with
// "error: receipts: D is not a regular file", where a --ledger that is
// not there is a usage error saying to check the path. Both are the
// caller's mistake: exit 64, saying what D is and what to name. A FIFO
// was "not a regular file", and a unix socket exited 1 with "receipts:
// open S: no such device or address": each is said by its kind.
func TestReceiptsLedgerNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.jsonl")
	makeSocket(t, sock)
	for _, c := range []struct{ path, is string }{{dir, "a directory"}, {fifo, "a FIFO (named pipe)"}, {sock, "a socket"}, {os.DevNull, "a device"}} {
		for _, args := range [][]string{{"scan"}, {"list"}, {"show", "att_x"}} {
			t.Run(strings.Join(args, " ")+" "+filepath.Base(c.path), func(t *testing.T) {
				r := cruxprov(t, append(append([]string{"receipts"}, args...), "--ledger", c.path)...)
				if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --ledger "+c.path+" is "+c.is+": name a ledger file (cruxprov receipts "+args[0]+", without --ledger, reads this host and user's)") {
					t.Errorf("%+v", r)
				}
			})
		}
	}
}

// TestLedgerAdviceNamesTheDirectory: a ledger no run has made yet, under
// a state directory this user cannot write (0555), was refused with
// "access DIR: permission denied; make the ledger and its directory
// writable by this user", neither of which exists: it names the
// directory to make writable. (The error is built here: root's runs
// ignore the mode, and receipts' TestWritableOfALedgerNotMadeYet makes
// the real one as an unprivileged user.)
func TestLedgerAdviceNamesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "receipts", "h-1.jsonl")
	err := refusal.Wrap(refusal.LedgerWriteFailed, &fs.PathError{Op: "access", Path: dir, Err: syscall.EACCES}, "cannot create receipts ledger %s", path)
	if got, want := ledgerAdvice(err), "; make the directory "+shellQuote(dir)+" writable by this user (a run makes what is missing of the ledger's path in it)"; got != want {
		t.Errorf("advice %q, want %q", got, want)
	}
	// A ledger file that is there and not writable keeps its advice.
	err = refusal.Wrap(refusal.LedgerWriteFailed, &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}, "cannot open receipts ledger %s", path)
	if got := ledgerAdvice(err); got != "; make the ledger and its directory writable by this user" {
		t.Errorf("advice of an unwritable ledger: %q", got)
	}
}

// TestRunLedgerNotAFile: run --ledger naming a directory (the state
// directory instead of the ledger in it) or a FIFO was refused
// ledger_write_failed "receipts ledger D is not a regular file", with no
// next step, where receipts scan|list|show make it a usage error. run
// says the same, before anything runs, and writes nothing there, saying
// what the path is (a FIFO was "not a regular file"; a unix socket was
// refused "cannot open receipts ledger S: … no such device or address").
func TestRunLedgerNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "sock.jsonl")
	makeSocket(t, sock)
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, is string }{{dir, "a directory"}, {fifo, "a FIFO (named pipe)"}, {sock, "a socket"}, {os.DevNull, "a device"}} {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			r := cruxprov(t, "run", "echo", "main", "--input", in, "--ledger", c.path)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --ledger "+c.path+" is "+c.is+": name a ledger file (cruxprov run, without --ledger, writes this host and user's)") {
				t.Errorf("%+v", r)
			}
			for d, n := range map[string]int{dir: 1, sockDir: 1} {
				if es, err := os.ReadDir(d); err != nil || len(es) != n {
					t.Errorf("%s holds %v (%v): want only the FIFO or socket", d, es, err)
				}
			}
		})
	}
}

// TestOwnLedgerNotAFile: a ledger path run and receipts take from
// --state-dir DIR or $XDG_STATE_HOME (one the caller did not name) that
// is a directory or a FIFO was refused ledger_write_failed "receipts: P
// is not a regular file" by run, and exited 1 with that line from
// receipts scan|list|show: it said neither where the path came from nor
// what to do. It is refused ledger_write_failed (every run is, until it
// is moved), before anything runs, naming the path, where it came from
// and the remedy, and nothing is written there. The remedy is typed,
// move_away ("to fix: mv P P.moved", and in --json): the mv was only in
// the detail's words, where other ledger conditions carry a remedy.
func TestOwnLedgerNotAFile(t *testing.T) {
	host, _ := os.Hostname()
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"directory", "FIFO", "socket"} {
		for _, from := range []string{"state-dir", "XDG_STATE_HOME"} {
			t.Run(kind+" "+from, func(t *testing.T) {
				dir := t.TempDir()
				var flags, env []string
				var ledger, says string
				if from == "state-dir" {
					flags, says = []string{"--state-dir", dir}, "(from --state-dir "+dir+")"
					ledger = filepath.Join(dir, "receipts", filepath.Base(receipts.DefaultPath(dir, host, os.Getuid())))
				} else {
					env, says = []string{"XDG_STATE_HOME=" + dir}, "(the default, under $XDG_STATE_HOME or ~/.local/state)"
					ledger = receipts.DefaultPath(dir, host, os.Getuid())
				}
				if err := os.MkdirAll(filepath.Dir(ledger), 0o700); err != nil {
					t.Fatal(err)
				}
				is := "a directory, not a ledger file"
				switch kind {
				case "FIFO":
					is = "a FIFO (named pipe), not a ledger file"
					if err := syscall.Mkfifo(ledger, 0o600); err != nil {
						t.Fatal(err)
					}
				case "socket":
					is = "a socket, not a ledger file"
					makeSocket(t, ledger)
				default:
					if err := os.Mkdir(ledger, 0o700); err != nil {
						t.Fatal(err)
					}
				}
				detail := "this host and user's receipts ledger " + ledger + " " + says + " is " + is + ": move it away, and the next run makes a new ledger there; or name a ledger file with --ledger"
				fix := "mv " + shellQuote(ledger) + " " + shellQuote(ledger+".moved")
				for _, args := range [][]string{{"run", "acme-nope", "echo", "--input", in}, {"receipts", "scan"}, {"receipts", "list"}, {"receipts", "show", "att_x"}} {
					cmd := exec.Command(bin, append(append(args, flags...), "--json")...)
					cmd.Env = append(append(os.Environ(), "CRUXPROV_HOME="+t.TempDir()), env...)
					r := runCmd(t, cmd)
					var doc struct {
						Refused struct {
							Code, Detail string
							Remedy       struct{ Action, Target, Command string }
						} `json:"refused"`
					}
					if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "ledger_write_failed" || doc.Refused.Detail != detail ||
						doc.Refused.Remedy.Action != "move_away" || doc.Refused.Remedy.Target != ledger || doc.Refused.Remedy.Command != fix ||
						r.stderr != "refused: ledger_write_failed: "+detail+"; to fix: "+fix+"\n" {
						t.Errorf("%s: want refused %q, to fix: %s: %+v", strings.Join(args, " "), detail, fix, r)
					}
				}
				if es, err := os.ReadDir(filepath.Dir(ledger)); err != nil || len(es) != 1 {
					t.Errorf("%s holds %v (%v): want only the %s", filepath.Dir(ledger), es, err, kind)
				}
			})
		}
	}
}

// TestReceiptsListShowTolerateCorrupt: one corrupt line refused the whole
// ledger to receipts list and show (ledger_corrupt), so the valid
// attempts before it could not be listed or shown, and they took no
// --tolerate-corrupt, as scan does. Strict stays their default; with the
// flag they list (show) the valid rows, then each corrupt line as scan
// prints it (--json: "corrupt", as scan's), and exit 0 as a tolerant
// scan does. The strict refusal advises the same command with the flag,
// which runs as printed.
func TestReceiptsListShowTolerateCorrupt(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "r.jsonl")
	writeReceipt(t, ledger, "att_one")
	writeReceipt(t, ledger, "att_two")
	st, err := os.Stat(ledger)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(ledger, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("not a receipt\n")
	f.Close()
	finding := "corrupt line: " + ledger + ": line 5 at byte offset " + strconv.FormatInt(st.Size(), 10) + " (13 bytes, " + digest.Sum([]byte("not a receipt")).String() + "): "
	for _, args := range [][]string{{"list"}, {"show", "att_two"}} {
		t.Run(args[0], func(t *testing.T) {
			strict := cruxprov(t, append(append([]string{"receipts"}, args...), "--ledger", ledger)...)
			fix := "to fix: cruxprov receipts " + strings.Join(args, " ") + " --ledger " + ledger + " --tolerate-corrupt"
			if strict.code != exitRefused || !strings.HasPrefix(strict.stderr, "refused: ledger_corrupt: ") || !strings.Contains(strict.stderr, fix) {
				t.Fatalf("strict: want refused, advising %q: %+v", fix, strict)
			}
			r := runFix(t, strict, dir, "XDG_STATE_HOME="+dir)
			if r.code != 0 || !strings.Contains(r.stdout, "att_two") || !strings.HasSuffix(r.stdout, "\n"+finding+"not a JSON object alone on its line\n") {
				t.Errorf("tolerant: want att_two, then %q: %+v", finding, r)
			}
			if args[0] == "list" && !strings.Contains(r.stdout, "att_one") {
				t.Errorf("tolerant list without att_one: %+v", r)
			}
			r = cruxprov(t, append(append([]string{"receipts"}, args...), "--ledger", ledger, "--tolerate-corrupt", "--json")...)
			var doc struct {
				Corrupt []struct {
					Path   string `json:"path"`
					Line   int    `json:"line"`
					Offset int64  `json:"offset"`
					SHA256 string `json:"sha256"`
				} `json:"corrupt"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Corrupt) != 1 || doc.Corrupt[0].Line != 5 ||
				doc.Corrupt[0].Offset != st.Size() || doc.Corrupt[0].SHA256 != digest.Sum([]byte("not a receipt")).String() || !strings.Contains(r.stdout, `"att_two"`) {
				t.Errorf("tolerant --json: %+v", r)
			}
		})
	}
}

// makeSocket leaves a unix socket at path (bound, then its listener
// closed: the file stays, as a crashed server's does). It is bound in a
// short directory and moved to path, which may be longer than a socket
// address may be (108 bytes).
func makeSocket(t *testing.T, path string) {
	t.Helper()
	short, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(short, "s")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(short, "s"), path); err != nil {
		t.Fatal(err)
	}
}

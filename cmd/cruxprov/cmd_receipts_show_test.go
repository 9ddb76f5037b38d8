package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/receipts"
)

// TestReceiptsShowNotFoundListsThatLedger: receipts show of an attempt
// that a named ledger (--ledger, --state-dir) does not hold advises the
// list of that ledger, a command that shows its attempts; it advised a
// bare `cruxprov receipts list`, which read this host and user's own
// ledger, where the attempt had never been looked for. The advice is run
// as given and lists the ledger's attempt.
func TestReceiptsShowNotFoundListsThatLedger(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state dir")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(state, "receipts", host+"-"+strconv.Itoa(os.Getuid())+".jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	in := receipts.Intent{AttemptID: "att_theirs", Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
		Backend: "local", Platform: "cp311-manylinux_2_36_x86_64", ProtocolVersion: 1, Tool: "cruxprov test",
		InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: "att_theirs", Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "own")) // this user's own ledger: none, and not the one asked about
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ledger", []string{"--ledger", ledger}, "cruxprov receipts list --ledger " + shellQuote(ledger) + " shows the attempts"},
		{"state-dir", []string{"--state-dir", state}, "cruxprov receipts list --state-dir " + shellQuote(state) + " shows the attempts"},
		{"tolerant", []string{"--state-dir", state, "--tolerate-corrupt"}, "cruxprov receipts list --state-dir " + shellQuote(state) + " --tolerate-corrupt shows the attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cruxprov(t, append([]string{"receipts", "show", "att_nope"}, tc.args...)...)
			if r.code != exitFailure || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "--ledger names another") {
				t.Fatalf("receipts show att_nope %v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, exitFailure, tc.want)
			}
			// The advice, run by a shell as given, lists the attempt that ledger holds.
			advice := r.stderr[strings.Index(r.stderr, "cruxprov receipts list"):strings.Index(r.stderr, " shows the attempts")]
			out, err := exec.Command("sh", "-c", strings.Replace(advice, "cruxprov", shellQuote(bin), 1)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "att_theirs") {
				t.Fatalf("the advice %q: %v\n%s", advice, err, out)
			}
		})
	}
	// This host and user's own ledger keeps its words.
	if r := cruxprov(t, "receipts", "show", "att_nope"); r.code != exitFailure || !strings.Contains(r.stderr, "no attempt att_nope in this host and user's ledger; cruxprov receipts list shows the attempts (--ledger names another ledger)") {
		t.Fatalf("receipts show att_nope: %+v", r)
	}
}

// TestReceiptsShowWithoutAttPrefix: receipts show of an attempt's hex
// without its att_ (a log that cut it, digits typed from a screen) said
// "no attempt 1870d3fe… in …", exit 1, beside att_1870d3fe… in the
// ledger (found walking executor.md). It shows that attempt; an id
// given whole still wins, and what matches nothing either way is still
// not found.
func TestReceiptsShowWithoutAttPrefix(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "r.jsonl")
	l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum([]byte("x")).String()
	const id = "att_1870d3fefb9ae032942b83937edc5bee"
	in := receipts.Intent{AttemptID: id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
		Backend: "local", Platform: "cp311-manylinux_2_36_x86_64", ProtocolVersion: 1, Tool: "cruxprov test",
		InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
	if _, err := l.Begin(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(context.Background(), receipts.Outcome{AttemptID: id, Status: receipts.StatusOK, ResultDigest: d, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, arg := range []string{id, "1870d3fefb9ae032942b83937edc5bee", "1870d3fe"} {
		r := cruxprov(t, "receipts", "show", arg, "--ledger", ledger)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "attempt          "+id+" ") {
			t.Errorf("receipts show %s: %+v", arg, r)
		}
	}
	if r := cruxprov(t, "receipts", "show", "deadbeef", "--ledger", ledger); r.code != exitFailure || !strings.Contains(r.stderr, "no attempt deadbeef in ") {
		t.Errorf("receipts show deadbeef: %+v", r)
	}
}

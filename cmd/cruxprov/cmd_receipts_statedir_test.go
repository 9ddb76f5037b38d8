package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReceiptsStateDirNotADirectory: receipts scan, list and show of this
// host and user's ledger where a file stands in its path said "error:
// receipts: open …: not a directory", exit 1, naming neither the file
// nor what to do. A --state-dir that is a file (a ledger named as the
// state directory, say) is a usage error saying to name the state
// directory; a file where a directory of the ledger's path must be (a
// file named receipts in the state directory), which refuses every run
// as well, is refused ledger_write_failed naming it, with the remedy
// move_away: "to fix: mv F F.moved" (the mv was in its words only).
func TestReceiptsStateDirNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "l.jsonl")
	state := filepath.Join(dir, "state")
	for _, f := range []string{file, filepath.Join(state, "receipts")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	blocked := filepath.Join(state, "receipts")
	for _, cmd := range [][]string{{"receipts", "scan"}, {"receipts", "list"}, {"receipts", "show", "att_x"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			r := cruxprov(t, append(cmd, "--state-dir", file)...)
			want := "usage: --state-dir " + file + " is a file, not a directory: name the executor's state directory"
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) {
				t.Errorf("--state-dir of a file: exit %d, stderr %q; want exit %d, %q", r.code, r.stderr, exitUsage, want)
			}
			r = cruxprov(t, append(cmd, "--state-dir", state)...)
			want = "refused: ledger_write_failed: this host and user's receipts ledger " + blocked + "/"
			if r.code != exitRefused || !strings.HasPrefix(r.stderr, want) ||
				!strings.Contains(r.stderr, blocked+" is a file where a directory of its path must be: move it away, and the next run makes a new ledger there") ||
				!strings.HasSuffix(r.stderr, "; to fix: mv "+shellQuote(blocked)+" "+shellQuote(blocked+".moved")+"\n") {
				t.Errorf("a file named receipts in the state directory: exit %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

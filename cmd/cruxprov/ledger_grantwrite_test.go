package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLedgerOwnReadOnlyAdvisesChmod: a scan of this user's own ledger
// (as a run would be) refused ledger_write_failed for a ledger this user
// owns whose mode is read-only, or, not made yet, a state directory of
// mode 0555, ends with "to fix: chmod u+w PATH" (grant_write), and the
// advice run as printed lets the scan pass. The words said to make it
// writable, with no to-fix line. Root is denied no write by a mode: the
// test runs as an unprivileged user (cruxprov-rootless) and skips as root.
func TestLedgerOwnReadOnlyAdvisesChmod(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is denied no write by a mode; run as an unprivileged user")
	}
	state := t.TempDir()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(state, "receipts", host+"-"+strconv.Itoa(os.Geteuid())+".jsonl")
	if err := os.MkdirAll(filepath.Dir(ledger), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledger, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, exec.Command(bin, "receipts", "scan", "--state-dir", state, "--json"))
	var doc struct {
		Refused struct {
			Code   string
			Remedy struct{ Action, Command string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitRefused || doc.Refused.Code != "ledger_write_failed" ||
		doc.Refused.Remedy.Action != "grant_write" || doc.Refused.Remedy.Command != "chmod u+w "+ledger ||
		!strings.Contains(r.stderr, "; to fix: chmod u+w "+ledger+"\n") {
		t.Fatalf("scan of its own read-only ledger: %v %+v", err, r)
	}
	if f := runFix(t, r, state); f.code != 0 {
		t.Fatalf("the advice as printed: %+v", f)
	}
	if r := cruxprov(t, "receipts", "scan", "--state-dir", state); r.code != 0 {
		t.Errorf("scan after the advice: %+v", r)
	}
	// A state directory of mode 0555 where the ledger is not made yet.
	ro := filepath.Join(t.TempDir(), "st")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	r = cruxprov(t, "receipts", "scan", "--state-dir", ro)
	if r.code != exitRefused || !strings.Contains(r.stderr, "; to fix: chmod u+w "+ro+"\n") {
		t.Errorf("scan with a state directory of mode 0555: %+v", r)
	}
}

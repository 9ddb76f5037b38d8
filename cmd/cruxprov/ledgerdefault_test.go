package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/receipts"
)

// TestLedgerDefaultPath: with no --ledger and no --state-dir, this host
// and user's ledger is $XDG_STATE_HOME/cruxprov/receipts/<hostname>-<uid>.jsonl,
// and ~/.local/state/… when XDG_STATE_HOME is unset or not absolute (the
// XDG spec says to ignore a relative one), DESIGN §10. receipts list reads
// the ledger there and names it; a ledger of another host or uid beside it
// is not this executor's.
func TestLedgerDefaultPath(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	home, xdg := t.TempDir(), t.TempDir()
	name := fmt.Sprintf("%s-%d.jsonl", host, os.Getuid())
	d := digest.Sum([]byte("x")).String()
	write := func(path, id string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		l, err := receipts.Open(context.Background(), path, receipts.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		in := receipts.Intent{AttemptID: id, Provider: "acme-echo", Entrypoint: "echo", SealDigest: d,
			Backend: "local", Platform: "linux-x86_64-cp311", ProtocolVersion: 1, Tool: "cruxprov test",
			InputDigest: d, ImplementationDigest: d, MaterializationDigest: d}
		if _, err := l.Begin(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	inHome := filepath.Join(home, ".local", "state", "cruxprov", "receipts", name)
	inXDG := filepath.Join(xdg, "cruxprov", "receipts", name)
	write(inHome, "att_home")
	write(inXDG, "att_xdg")
	write(filepath.Join(xdg, "cruxprov", "receipts", fmt.Sprintf("%s-%d.jsonl", host, os.Getuid()+1)), "att_other_uid")
	write(filepath.Join(xdg, "cruxprov", "receipts", fmt.Sprintf("other-%s-%d.jsonl", host, os.Getuid())), "att_other_host")
	for _, tc := range []struct {
		xdg, ledger, attempt string
	}{
		{"", inHome, "att_home"},
		{"relative/state", inHome, "att_home"},
		{xdg, inXDG, "att_xdg"},
	} {
		t.Run("XDG_STATE_HOME="+tc.xdg, func(t *testing.T) {
			cmd := exec.Command(bin, "receipts", "list", "--json")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CRUXPROV_HOME=" + t.TempDir()}
			if tc.xdg != "" {
				cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+tc.xdg)
			}
			r := runCmd(t, cmd)
			var doc struct {
				Ledgers []string
				Orphans []struct {
					Intent struct {
						AttemptID string `json:"attempt_id"`
					}
				}
				Attempts []json.RawMessage
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
				t.Fatalf("receipts list --json: %+v", r)
			}
			if len(doc.Ledgers) != 1 || doc.Ledgers[0] != tc.ledger || len(doc.Orphans) != 1 || doc.Orphans[0].Intent.AttemptID != tc.attempt {
				t.Errorf("receipts list read %v, orphans %+v; want %s alone, holding %s", doc.Ledgers, doc.Orphans, tc.ledger, tc.attempt)
			}
		})
	}
}

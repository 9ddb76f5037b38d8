package receipts_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestOpenSaysWhatToDo: a ledger that Open cannot make or open because
// of what stands on its path is refused ledger_write_failed with what to
// do next in its words, which a Go executor has (the command line adds
// its own): a directory (the state directory named as the ledger), a
// file where one of its directories must be made, a directory this user
// may not write, a ledger it may not write or that is immutable. Open
// said only what the file system said ("… is a directory, not a regular
// file"; "mkdir …: permission denied"; "open …: operation not
// permitted").
func TestOpenSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ path, want string }{
		"a directory":              {dir, "move this away"},
		"a file above it":          {filepath.Join(file, "receipts", "r.jsonl"), "move it away, or keep the ledger elsewhere"},
		"a file above it, at once": {filepath.Join(file, "r.jsonl"), "move it away, or keep the ledger elsewhere"},
	}
	if os.Geteuid() != 0 { // root writes any directory
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases["a directory this user may not write"] = struct{ path, want string }{filepath.Join(ro, "state", "r.jsonl"), "writable by this user, or keep the ledger in a directory this user can write"}
	}
	// A ledger that is there and that the file system will not open for
	// appending: a mode (a user who is not root), an immutable attribute
	// (root, where chattr works).
	ledger := filepath.Join(dir, "l.jsonl")
	if l, err := receipts.Open(ctx, ledger, receipts.Options{}); err != nil {
		t.Fatal(err)
	} else {
		l.Close()
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(ledger, 0o400); err != nil {
			t.Fatal(err)
		}
		cases["a ledger this user may not write"] = struct{ path, want string }{ledger, "; make the ledger and its directory writable by this user, or open a ledger where this user can write"}
	} else if out, err := exec.Command("chattr", "+i", ledger).CombinedOutput(); err == nil {
		defer exec.Command("chattr", "-i", ledger).Run()
		cases["an immutable ledger"] = struct{ path, want string }{ledger, "; an immutable attribute (lsattr) or a security module stops writes to the ledger: lift it"}
	} else {
		t.Logf("chattr +i: %v %s (no immutable flag here)", err, out)
	}
	for name, tc := range cases {
		l, err := receipts.Open(ctx, tc.path, receipts.Options{})
		if err == nil {
			l.Close()
			t.Errorf("%s: Open succeeded", name)
			continue
		}
		if refusal.CodeOf(err) != refusal.LedgerWriteFailed || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ledger_write_failed saying %q", name, err, tc.want)
		}
		if strings.Count(err.Error(), "is a directory") > 1 {
			t.Errorf("%s: says it twice: %v", name, err)
		}
	}
}

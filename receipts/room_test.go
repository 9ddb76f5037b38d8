package receipts

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRoomOf: what a run needs of its ledger's file system: room for an
// intent and its outcome, and an inode for each file it makes (the ledger
// and its missing directories where no run has made it, its key locks
// where no keyed run has); what is there needs none. receipts scan warns
// when the file system has less (cmd's TestReceiptsScanWarnsOfAFullFileSystem
// fills a real tmpfs).
func TestRoomOf(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "r.jsonl")
	r, err := RoomOf(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Of != dir || r.NeedInodes != 4 || r.NeedBytes != 2*MaxRow || r.FreeBytes == 0 || r.Short() {
		t.Errorf("a ledger not made yet: %+v", r)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p, p + ".inflight"} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err = RoomOf(p)
		if err != nil {
			t.Fatal(err)
		}
	}
	if r.Of != p || r.NeedInodes != 0 || r.Short() {
		t.Errorf("a ledger and its key locks: %+v", r)
	}
	full := Room{FreeBytes: MaxRow, NeedBytes: 2 * MaxRow}
	noInodes := Room{FreeBytes: 4 * MaxRow, NeedBytes: 2 * MaxRow, CountsInodes: true, NeedInodes: 1}
	uncounted := Room{FreeBytes: 4 * MaxRow, NeedBytes: 2 * MaxRow, NeedInodes: 1} // btrfs: no inode count
	if !full.Short() || !noInodes.Short() || uncounted.Short() {
		t.Errorf("Short: %v %v %v", full.Short(), noInodes.Short(), uncounted.Short())
	}
}

package receipts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
)

// TestAsUnprivilegedExecutor runs Open, append, repair and scan as uid
// 65534 in a state directory it owns (an executor is not root, and root
// ignores file modes): the ledger's directories are created 0700, the
// file 0600, and the repair's lock and journal work in that directory.
func TestAsUnprivilegedExecutor(t *testing.T) {
	asuser.Require(t, "run as uid 65534")
	base := asuser.Dir(t, "receipts-nobody-")
	exe := asuser.CopySelf(t, base)
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	path := DefaultPath(state, "exec-host", 65534)
	cmd := asuser.Command(65534, 65534, exe)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GORACE=atexit_sleep_ms=0", childEnv + "=nobody", ledgerEnv + "=" + path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid 65534: %v: %s", err, out)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
		t.Fatalf("ledger owned by uid %d", uid)
	}
}

// nobodyChild is the unprivileged side of TestAsUnprivilegedExecutor.
func nobodyChild(ctx context.Context, path string) error {
	if os.Getuid() != 65534 {
		return fmt.Errorf("running as uid %d", os.Getuid())
	}
	l, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	d, err := l.Begin(ctx, testIntent("", "k", "in"))
	if err != nil {
		return err
	}
	if err := l.Finish(ctx, testOutcome(d.AttemptID, StatusOK)); err != nil {
		return err
	}
	l.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	f.WriteString(`{"format":"cruxprov.rec`)
	f.Close()
	if l, err = Open(ctx, path, Options{}); err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	if d, err := l.Begin(ctx, testIntent("", "k", "in")); err != nil || d.Replay == nil {
		return fmt.Errorf("replay: %+v %v", d, err)
	}
	l.Close()
	res, err := Scan(ctx, []string{path}, ScanOptions{})
	if err != nil {
		return err
	}
	if len(res.Attempts) != 2 || len(res.Torn) != 1 || len(res.Orphans) != 0 {
		return fmt.Errorf("scan: %d attempts, %d torn, %d orphans", len(res.Attempts), len(res.Torn), len(res.Orphans))
	}
	want := map[string]os.FileMode{
		path:                             os.FileMode(0o600),
		path + ".inflight":               os.FileMode(0o600),
		filepath.Dir(path):               os.ModeDir | 0o700,
		filepath.Dir(filepath.Dir(path)): os.ModeDir | 0o700,
	}
	for p, m := range want {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode() != m {
			return fmt.Errorf("%s: mode %v, want %v", p, st.Mode(), m)
		}
	}
	for _, p := range []string{".lock", ".repair", ".repair.tmp"} {
		if _, err := os.Stat(path + p); err == nil {
			return fmt.Errorf("%s left behind", p)
		}
	}
	return nil
}

// TestAuditorScan: a user who may read another user's ledger (an auditor
// given read access) scans it while its writer's repair sidecars, 0600 as
// the writer makes them, are pending. The scan looks at the sidecars as
// the ledger's next writer will, but that writer is not this user: a
// sidecar it cannot read is not refused here (it would have failed every
// scan of an auditor while its writer ran fine).
func TestAuditorScan(t *testing.T) {
	if os.Getenv("CRUXPROV_AUDITOR_LEDGER") != "" {
		path := os.Getenv("CRUXPROV_AUDITOR_LEDGER")
		res, err := Scan(context.Background(), []string{path}, ScanOptions{})
		if err != nil || len(res.Attempts) != 1 || len(res.Tails) != 1 {
			t.Fatalf("the auditor's scan: %v %+v", err, res)
		}
		return
	}
	asuser.Require(t, "scan as uid 65534")
	base := asuser.Dir(t, "receipts-auditor-")
	path := filepath.Join(base, "l.jsonl")
	prefix := rows(t, "a")
	frag := `{"frag`
	os.WriteFile(path, []byte(prefix+frag), 0o644)
	torn := encodeTorn(int64(len(prefix)), []byte(frag), t0)
	os.WriteFile(path+".repair", []byte(`{"format":"cruxprov.receipt-repair/v1","offset":`+itoa(len(prefix))+`,"row":`+quote(string(torn[:len(torn)-1]))+"}\n"), 0o600)
	os.WriteFile(path+".lock", []byte("1\n"), 0o600)
	asuser.RunTest(t, base, "TestAuditorScan", "CRUXPROV_AUDITOR_LEDGER="+path)
	// The owner's own scan reads them, and finds the repair pending.
	if res := scanT(t, path); len(res.Repairs) != 1 || res.Repairs[0].Reason != "" {
		t.Fatalf("the owner's scan: %+v", res.Repairs)
	}
}

package invoke_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// TestLauncherDropsSIGTERM: a caller's Launcher that ignores SIGTERM and
// never starts the harness (or outlives it) neither hangs the run nor
// leaves a process behind: at the timeout the executor's SIGTERM is
// ignored, and its SIGKILL, at the grace's end at the latest, ends every
// process of the run; the run is recorded timeout with exit status 137. In its pid
// namespace (the init shell its first process, which drops a SIGTERM
// it has no handler for) and without one (its process group). The
// container executor's counterpart, a pid 1 of the caller's own image,
// is podman's TestPid1DropsSIGTERM.
func TestLauncherDropsSIGTERM(t *testing.T) {
	f := fixture(t)
	const grace = time.Second
	for _, noNS := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoNamespaces=%t", noNS), func(t *testing.T) {
			l, path := openLedger(t)
			marker := fmt.Sprintf("cruxprov-launcher-drops-term-%d-%t", os.Getpid(), noNS)
			launcher := invoke.Launcher{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 1; done`, marker}
			ex := &invoke.Subprocess{Ledger: l, Grace: grace, WorkdirParent: t.TempDir(), Sandbox: launcher, NoNamespaces: noNS}
			c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
			c.Limits.TimeoutMS = 1000
			begin := time.Now()
			res, err := ex.Run(context.Background(), c)
			took := time.Since(begin)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != invoke.StatusTimeout || res.Error == nil || res.Error.Code != invoke.CodeTimeout || res.ExitCode != 137 {
				t.Errorf("status %s, exit %d, %+v; want timeout, exit 137", res.Status, res.ExitCode, res.Error)
			}
			// SIGKILLed at the grace's end, or at once where the
			// executor saw that no process of the run would act on the
			// SIGTERM (runDropsSignal: the launcher, the namespace's
			// first process, ignoring it): not later.
			if took > time.Second+grace+20*time.Second {
				t.Errorf("the run took %s; want its timeout and grace, and not much more", took)
			}
			if left := processesWith(marker); len(left) > 0 {
				t.Errorf("processes of the launcher left: %v", left)
			}
			sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
			if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil || sr.Attempts[0].Outcome.Status != string(invoke.StatusTimeout) {
				t.Errorf("the receipt: %v %+v; want timeout", err, sr)
			}
		})
	}
}

// processesWith is the pids of the processes whose command line holds
// marker.
func processesWith(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

// uniqueToken is a token for the fixture's argv, one this test alone
// uses, whose processes are killed when the test ends: a run without
// namespaces cannot reach a provider's child that left its session
// (DESIGN §10; the term entrypoint leaves one, sleeping an hour), and
// each run of the suite left two behind.
func uniqueToken(t *testing.T, name string) string {
	t.Helper()
	token := fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, pid := range processesWith(token) {
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return token
}

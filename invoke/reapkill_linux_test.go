package invoke_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
)

// TestNoKillAfterTheReap: every kill of a started run is sent while its
// process is still this executor's child (alive, or a zombie not yet
// reaped): once reaped, its pid, and a process group of that id, may be
// another process's. The run's last kill, of what outlived the harness,
// was sent to -pid after cmd.Wait had reaped it, in every run without a
// pid namespace; and a timeout's or cancel's kill that came as the run
// ended could follow the reap in any run.
func TestNoKillAfterTheReap(t *testing.T) {
	f := fixture(t)
	var mu sync.Mutex
	var late []string
	defer invoke.SetRunSignal(func(pid int, _ string, sig syscall.Signal) {
		if ppid, state := procParent(pid); ppid != os.Getpid() {
			mu.Lock()
			late = append(late, fmt.Sprintf("%v to %d (parent %d, state %q)", sig, pid, ppid, state))
			mu.Unlock()
		}
	})()
	secrets := map[string]string{"acme/alpha": "a", "acme/beta": "b"}
	for _, tc := range []struct {
		name    string
		noNS    bool
		ep      string
		timeout int64
		want    invoke.Status
	}{
		{"EndsItself", true, "probe", 0, invoke.StatusOK},
		{"LeavesAChild", true, "linger", 0, invoke.StatusOK},
		{"TimesOut", true, "term", 700, invoke.StatusTimeout},
		{"EndsItselfInANamespace", false, "probe", 0, invoke.StatusOK},
		{"TimesOutInANamespace", false, "term", 700, invoke.StatusTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openLedger(t)
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), NoNamespaces: tc.noNS}
			c := f.Call(tc.ep, map[string]string{"token": uniqueToken(t, "reapkill")}, secrets)
			if tc.timeout > 0 {
				c.Limits.TimeoutMS = tc.timeout
			}
			res, err := ex.Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Fatalf("%s %+v; want %s", res.Status, res.Error, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(late) > 0 {
				t.Errorf("kills sent after the run's process was reaped: %s", strings.Join(late, "; "))
				late = nil
			}
		})
	}
}

// procParent is pid's parent and state as /proc gives them (0, "" when
// there is no such process).
func procParent(pid int) (int, string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid, f[0]
}

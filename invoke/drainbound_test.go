package invoke_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
)

// TestHeldPipesFailTheRun: a run whose output pipes a process it left
// behind still holds once the harness has exited (a setsid() grandchild,
// out of its process group and reparented away, which the executor cannot
// find to kill without a pid namespace) is not ok: the wait for the pipes
// stops at the grace, and what was read may not be all the run wrote.
// Before, the end of that wait was dropped and the run recorded as the
// part read said: ok, its result and byte counts those of output that
// had not ended. A run the executor stopped itself (the timeout) keeps
// its own outcome.
func TestHeldPipesFailTheRun(t *testing.T) {
	f := fixture(t)
	const grace = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		// hold is the redirections of the process left behind: fd 1 and 2
		// are the run's stdout and stderr, 3 the secret pipe and 4
		// (invoke.ProtocolFD) the result channel.
		hold, ep string
		timeout  int64
		status   invoke.Status
		code     string
		want     string
	}{
		{"Nothing", ">/dev/null 2>&1 3>&- 4>&-", "probe", 0, invoke.StatusOK, "", ""},
		{"Stdout", "3>&- 4>&-", "probe", 0, invoke.StatusError, invoke.CodeExited,
			"stdout and stderr were still held open 500ms after the provider exited (exit status 0)"},
		{"Channel", ">/dev/null 2>&1 3>&-", "probe", 0, invoke.StatusError, invoke.CodeExited,
			"the result channel was still held open 500ms after the provider exited (exit status 0)"},
		{"Timeout", "3>&-", "term", 1000, invoke.StatusTimeout, invoke.CodeTimeout, "killed after the 1000 ms timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, path := openLedger(t)
			pidFile := filepath.Join(t.TempDir(), "holder.pid")
			// A launcher that leaves a sleep behind, in a session of its
			// own and detached at once (its parent, a subshell, exits), then
			// runs the harness in its place.
			script := fmt.Sprintf(`(setsid sh -c 'echo $$ >%s; exec sleep 120' </dev/null %s &); exec "$@"`, pidFile, tc.hold)
			t.Cleanup(func() {
				if b, err := os.ReadFile(pidFile); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), NoNamespaces: true, Grace: grace,
				Sandbox: invoke.Launcher{"/bin/sh", "-c", script, "sh"}}
			c := f.Call(tc.ep, map[string]string{"token": uniqueToken(t, "heldpipes")}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
			if tc.timeout > 0 {
				c.Limits.TimeoutMS = tc.timeout
			}
			res, err := ex.Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(pidFile); err != nil { // written at once, before the harness has started its interpreter
				t.Fatalf("the launcher left no process behind: %v", err)
			}
			if res.Status != tc.status || (res.Error == nil) != (tc.code == "") ||
				res.Error != nil && (res.Error.Code != tc.code || !strings.Contains(res.Error.Message, tc.want)) {
				t.Fatalf("%s %+v; want %s %s saying %q", res.Status, res.Error, tc.status, tc.code, tc.want)
			}
			if tc.code == invoke.CodeExited && (res.Value != nil || !strings.Contains(res.Error.Message, "may not be all the run wrote")) {
				t.Errorf("result %s, message %q; want no result, and the message to say the output may be incomplete", res.Value, res.Error.Message)
			}
			sr, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
			if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil {
				t.Fatalf("scan: %v %+v", err, sr)
			}
			o := sr.Attempts[0].Outcome
			if o.Status != string(tc.status) || (o.ErrorMessage == "") != (tc.want == "") || !strings.Contains(o.ErrorMessage, tc.want) ||
				tc.code != "" && o.ResultDigest != "" {
				t.Errorf("the receipt %+v; want the run's %s %q, no result unless ok", o, tc.status, tc.want)
			}
		})
	}
}

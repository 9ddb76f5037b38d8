package invoke_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/invoke"
)

// TestNoCoreDumps: the processes of a run may not dump core, whatever
// limit the executor was started with. The harness holds the secret
// bundle in memory: a provider's crash (a C extension's segfault) dumped
// it with the executor's RLIMIT_CORE (unlimited under many services and
// CI runners), into a core file or systemd-coredump's store, which
// outlive the run. Seen from /proc/PID/limits of the harness of a run
// started by a cruxprov under `prlimit --core=unlimited`.
func TestNoCoreDumps(t *testing.T) {
	f := fixture(t)
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh: the harness forks its own init")
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max == 0 {
		t.Skip("this process may not dump core at all (hard RLIMIT_CORE 0)")
	}
	raised := unix.Rlimit{Cur: old.Max, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &raised); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_CORE, &old)
	token := "cruxprov-core-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	l, _ := openLedger(t)
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: t.TempDir(), Grace: 100 * time.Millisecond}
	c := f.Call("term", map[string]string{"token": token}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Limits.TimeoutMS = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		ex.Run(context.Background(), c)
	}()
	// The run's processes that carry the token: the provider's children,
	// which inherit the harness's limits.
	var seen []string
	for deadline := time.Now().Add(3 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(b), token) {
				continue
			}
			lim, err := os.ReadFile(filepath.Join(filepath.Dir(p), "limits"))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(lim), "\n") {
				if strings.HasPrefix(line, "Max core file size") {
					seen = append(seen, line)
				}
			}
		}
	}
	<-done
	if len(seen) == 0 {
		t.Fatal("no process of the run seen")
	}
	for _, line := range seen {
		if fs := strings.Fields(line); len(fs) < 6 || fs[4] != "0" || fs[5] != "0" {
			t.Errorf("a process of the run may dump core: %q", line)
		}
	}
}

package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestInheritedDescriptorKeptFromTheRun: a descriptor the executor's
// process opened without O_CLOEXEC reaches no provider, even where
// /proc/self/fd cannot be opened: the process out of descriptors
// (EMFILE), or no /proc. close_range(2) marks every descriptor from 3 up
// close-on-exec without opening anything; where it is missing (a kernel
// before 5.11) the /proc walk does it, and where that cannot be done
// either the run is refused invoke_failed, nothing started, saying what
// to do. Before, the sweep was the walk alone and did nothing, silently,
// where it could not open /proc/self/fd: the descriptor reached the
// provider. In a child process (the test binary again), where nothing
// else runs beside the descriptor left inheritable.
func TestInheritedDescriptorKeptFromTheRun(t *testing.T) {
	f := fixture(t)
	fxj, _ := json.Marshal(f)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_INVOKE_CHILD=cloexec", "CRUXPROV_INVOKE_FIXTURES=" + string(fxj), "CRUXPROV_INVOKE_WORK=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rep cloexecReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	t.Logf("the child: %s", out)
	// The table full: close_range marks the descriptor; without it the
	// walk cannot, and says so.
	if len(rep.Full) != 2 || rep.Full[0] != "marked, <nil>" ||
		!strings.HasPrefix(rep.Full[1], "not marked, ") || !strings.Contains(rep.Full[1], "too many open files") ||
		!strings.Contains(rep.Full[1], "this process is out of file descriptors: raise its limit") {
		t.Errorf("CloseInherited with no descriptor free, with and without close_range: %q; want the descriptor marked, then an error saying this process is out of descriptors", rep.Full)
	}
	// Runs: close_range without /proc; the walk without close_range; neither.
	want := []string{"ok", "ok", "refused invoke_failed"}
	if !slices.Equal(rep.Runs, want) {
		t.Errorf("runs %q, want %q", rep.Runs, want)
	}
	const says = "cannot keep this process's open descriptors from the provider, so it was not started: close_range(2) could not mark them close-on-exec (function not implemented), and their list could not be read"
	if !strings.Contains(rep.Message, says) || !strings.HasSuffix(rep.Message, "/proc is not mounted here: mount it, or run on Linux 5.11 or later, whose close_range(2) needs no /proc") {
		t.Errorf("the refusal %q; want it to say %q and what to do", rep.Message, says)
	}
	if len(rep.Leaked) != 0 {
		t.Errorf("the descriptor opened without O_CLOEXEC reached the provider: %q", rep.Leaked)
	}
	if len(rep.Outcomes) != 3 || rep.Outcomes[2] != receipts.StatusRefused {
		t.Errorf("the ledger's outcomes %q; want the third run refused", rep.Outcomes)
	}
}

type cloexecReport struct {
	Full     []string `json:"full"`
	Runs     []string `json:"runs"`
	Message  string   `json:"message"`
	Leaked   []string `json:"leaked"`
	Outcomes []string `json:"outcomes"`
	Err      string   `json:"err,omitempty"`
}

// cloexecMain is TestInheritedDescriptorKeptFromTheRun's child.
func cloexecMain() int {
	var rep cloexecReport
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	ctx := context.Background()
	f, work, l, err := childLedger("receipts.jsonl")
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer l.Close()
	leak := filepath.Join(work, "leaked-descriptor")
	if err := os.WriteFile(leak, []byte("the executor's private file"), 0o600); err != nil {
		rep.Err = err.Error()
		return 0
	}
	fd, err := syscall.Open(leak, syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer syscall.Close(fd)
	inheritable := func() error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
		return err
	}
	marked := func() string {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC != 0 {
			return "marked"
		}
		return "not marked"
	}

	for _, noCloseRange := range []bool{false, true} {
		if err := inheritable(); err != nil {
			rep.Err = err.Error()
			return 0
		}
		restore := invoke.SetCloexecFallback(noCloseRange, "")
		release, err := fillFDs()
		if err != nil {
			restore()
			rep.Err = err.Error()
			return 0
		}
		cerr := invoke.CloseInherited()
		release()
		restore()
		rep.Full = append(rep.Full, fmt.Sprintf("%s, %v", marked(), cerr))
	}

	noProc := filepath.Join(work, "no-proc") // not there: /proc not mounted
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: work}
	for _, tc := range []struct {
		noCloseRange bool
		dir          string
	}{{false, noProc}, {true, ""}, {true, noProc}} {
		if err := inheritable(); err != nil {
			rep.Err = err.Error()
			return 0
		}
		restore := invoke.SetCloexecFallback(tc.noCloseRange, tc.dir)
		res, err := ex.Run(ctx, f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		restore()
		if err != nil {
			var r *refusal.Error
			if !errors.As(err, &r) {
				rep.Err = err.Error()
				return 0
			}
			rep.Runs = append(rep.Runs, "refused "+string(r.Code))
			rep.Message = r.Message()
			continue
		}
		rep.Runs = append(rep.Runs, string(res.Status))
		var p struct {
			FDs map[string]string `json:"fds"`
		}
		if err := json.Unmarshal(res.Value, &p); err != nil || len(p.FDs) == 0 {
			rep.Err = fmt.Sprintf("probe: %v %s", err, res.Value)
			return 0
		}
		for n, target := range p.FDs {
			if strings.Contains(target, "leaked-descriptor") {
				rep.Leaked = append(rep.Leaked, fmt.Sprintf("run %d: fd %s %s", len(rep.Runs), n, target))
			}
		}
	}
	sr, err := receipts.Scan(ctx, []string{l.Path()}, receipts.ScanOptions{})
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	for _, a := range sr.Attempts {
		if a.Outcome != nil {
			rep.Outcomes = append(rep.Outcomes, a.Outcome.Status)
		}
	}
	return 0
}

// fillFDs fills this process's descriptor table: its limit lowered a
// little above the descriptors it holds, and filled to it. The function
// it returns empties it and restores the limit.
func fillFDs() (func(), error) {
	var saved syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	lim := saved
	lim.Cur = uint64(len(ents) + 64)
	if lim.Cur > lim.Max {
		return nil, fmt.Errorf("the descriptor limit %d is too low to test", lim.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, err
	}
	var fill []int
	release := func() {
		for _, fd := range fill {
			syscall.Close(fd)
		}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved)
	}
	for {
		fd, err := syscall.Dup(2)
		if errors.Is(err, syscall.EMFILE) {
			return release, nil
		}
		if err != nil {
			release()
			return nil, err
		}
		fill = append(fill, fd)
	}
}

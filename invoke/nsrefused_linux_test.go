package invoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
)

// TestNamespacesRefusedRecorded: where the kernel refuses a run's user and
// pid namespaces, the run is contained by its process group, and its
// receipt says so ("unenforced": ["namespaces"]), as it does with
// NoNamespaces; before, the fallback left no trace in the receipt. A
// kernel that refuses them only after this executor found them allowed
// refuses that run (its intent said they held) and the next run records
// the fallback. The refusal is the kernel's own: a child process in a user
// namespace of its own sets that namespace's user.max_user_namespaces to
// 0 (the limit is per user namespace, so the machine's is untouched).
func TestNamespacesRefusedRecorded(t *testing.T) {
	f := fixture(t)
	// Here, allowed: a run's intent has no unenforced limit, with or
	// without a shell to ask with; with NoNamespaces it names the
	// namespaces.
	for i, ex := range []*invoke.Subprocess{{}, {}, {NoNamespaces: true}} {
		func() {
			if i == 1 {
				defer invoke.WithoutShell()()
			}
			l, path := openLedger(t)
			ex.Ledger, ex.WorkdirParent = l, t.TempDir()
			res, err := ex.Run(context.Background(), f.Call("orphan", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
			if err != nil || res.Status != invoke.StatusOK {
				t.Fatalf("run %d: %v %+v", i, err, res)
			}
			var want []string
			if ex.NoNamespaces {
				want = []string{invoke.LimitNamespaces}
			}
			if os.Geteuid() == 0 && invoke.MountNamespaceRefused() {
				// root without CAP_SYS_ADMIN: no read-only view of the env
				want = append(want, invoke.LimitReadOnlyEnv)
			}
			if got := unenforced(t, path); !slices.Equal(got, want) {
				t.Errorf("run %d (NoNamespaces %v): unenforced %q, want %q", i, ex.NoNamespaces, got, want)
			}
		}()
	}

	fxj, _ := json.Marshal(f)
	work := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_INVOKE_CHILD=nsrefused", "CRUXPROV_INVOKE_FIXTURES=" + string(fxj), "CRUXPROV_INVOKE_WORK=" + work, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
			t.Skipf("this machine refuses a user namespace to the test itself: %v", err)
		}
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rep nsReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	// 1: allowed, asked and remembered; 2: refused after that: refused,
	// nothing ran; 3: asked again, refused: ran without, and says so; 4:
	// the same where there is no shell to ask with (the interpreter asks).
	want := []string{"ok []", "refused invoke_failed []", "ok [namespaces]", "ok [namespaces]"}
	if !slices.Equal(rep.Runs, want) {
		t.Errorf("runs %q, want %q", rep.Runs, want)
	}
	if rep.Parent[0] == rep.Parent[2] {
		t.Errorf("the harness's parent was %q with and without the namespaces: the fallback did not happen", rep.Parent[0])
	}
}

type nsReport struct {
	Runs   []string  `json:"runs"`
	Parent [4]string `json:"parent"`
	Err    string    `json:"err,omitempty"`
}

// nsRefusedMain is TestNamespacesRefusedRecorded's child, root of a user
// namespace of its own: four runs, the kernel refusing the namespaces
// from the second on, the fourth without a shell.
func nsRefusedMain() int {
	var rep nsReport
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	ctx := context.Background()
	f, work, l, err := childLedger("receipts.jsonl")
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	defer l.Close()
	path := l.Path()
	ex := &invoke.Subprocess{Ledger: l, WorkdirParent: work}
	for i := range 4 {
		if i == 3 {
			defer invoke.WithoutShell()()
		}
		if i == 1 {
			if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
				rep.Err = err.Error()
				return 0
			}
		}
		res, err := ex.Run(ctx, f.Call("orphan", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"}))
		st := ""
		switch {
		case err != nil:
			var r *refusal.Error
			if !errors.As(err, &r) {
				rep.Err = err.Error()
				return 0
			}
			st = "refused " + string(r.Code)
		default:
			st = string(res.Status)
			var v struct {
				Parent string `json:"parent"`
			}
			json.Unmarshal(res.Value, &v)
			rep.Parent[i] = v.Parent
		}
		sr, err := receipts.Scan(ctx, []string{path}, receipts.ScanOptions{})
		if err != nil {
			rep.Err = err.Error()
			return 0
		}
		if len(sr.Attempts) != i+1 {
			rep.Err = fmt.Sprintf("%d attempts in the ledger after run %d", len(sr.Attempts), i+1)
			return 0
		}
		rep.Runs = append(rep.Runs, fmt.Sprintf("%s %v", st, sr.Attempts[i].Intent.Unenforced))
	}
	return 0
}

// unenforced returns the limits the first intent in the ledger at path
// names.
func unenforced(t *testing.T, path string) []string {
	t.Helper()
	r, err := receipts.Scan(context.Background(), []string{path}, receipts.ScanOptions{})
	if err != nil || len(r.Attempts) == 0 {
		t.Fatalf("scan %s: %v", path, err)
	}
	return r.Attempts[0].Intent.Unenforced
}

package podman

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
)

// pid1Image writes the fixture's image with entrypoint in place of
// cruxshim into a layout of its own, and returns its oci: reference and
// digest: a caller's own image whose pid 1 is not cruxshim, which passes
// a SIGTERM on to the harness (shim/init_linux.go).
func pid1Image(t *testing.T, f *invoketest.Container, entrypoint []string) (string, digest.Digest) {
	t.Helper()
	lp, err := layout.FromPath(f.Layout)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(f.MaterializationDigest.String())
	if err != nil {
		t.Fatal(err)
	}
	img, err := lp.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config.DeepCopy()
	cfg.Entrypoint, cfg.Cmd = entrypoint, nil
	if img, err = mutate.Config(img, *cfg); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	out, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		t.Fatal(err)
	}
	if err := out.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	md, err := digest.Parse(d.String())
	if err != nil {
		t.Fatal(err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	// The image podman stores for it (its id, the config digest) goes
	// with the test; the fixture's layers stay, shared with it.
	t.Cleanup(func() {
		(&Executor{}).podmanOut(context.Background(), "rmi", "--ignore", cfgName.Hex)
	})
	return image.LayoutPrefix + dir + "@" + d.String(), md
}

// TestPid1DropsSIGTERM: a container whose pid 1 is the caller's own
// (an image whose entrypoint is not cruxshim) and drops SIGTERM, as the
// first process of a pid namespace drops any signal it has no handler
// for from outside it (the shell's trap "" TERM, python's SIG_IGN, or
// no handler at all), neither hangs the run nor leaves the container
// running: at the timeout, and at the caller's cancel, the executor's
// SIGTERM (podman kill --signal TERM) is dropped, the grace passes,
// and its SIGKILL (podman kill --signal KILL, which the kernel delivers
// to a namespace's pid 1 from its parent namespace) ends it; the run is
// recorded timeout (or cancelled) with exit status 137, and the
// container is removed. The grace is the bound, as docs/executor.md
// says (Container runs, 6: TERM, then KILL after the grace); nothing of
// it depends on cruxshim being pid 1.
func TestPid1DropsSIGTERM(t *testing.T) {
	pid1DropsSIGTERM(t, &Executor{}, fixture(t))
}

func pid1DropsSIGTERM(t *testing.T, base *Executor, f *invoketest.Container) {
	t.Helper()
	const (
		timeoutMS = 4000
		grace     = 2 * time.Second
	)
	for _, c := range []struct {
		name       string
		entrypoint []string
		cancel     bool
	}{
		{"sh trap", []string{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 1; done`}, false},
		{"python SIG_IGN", []string{"/opt/cruxprov/env/bin/python", "-I", "-c",
			"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"}, false},
		{"no handler", []string{"/opt/cruxprov/env/bin/python", "-I", "-c", "import time; time.sleep(1000)"}, false},
		{"sh trap cancelled", []string{"/bin/sh", "-c", `trap "" TERM; while :; do sleep 1; done`}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, md := pid1Image(t, f, c.entrypoint)
			ledger := filepath.Join(t.TempDir(), "receipts.jsonl")
			l, err := receipts.Open(context.Background(), ledger, receipts.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			e := *base
			e.Ledger, e.Grace = l, grace
			call := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
			call.Image, call.MaterializationDigest = ref, md
			call.Budgets.TimeoutMS = timeoutMS
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel {
				call.Budgets.TimeoutMS = 120_000 // podman's backstop, 127 s
			}
			// When its container runs (seen by podman ps, a few hundred
			// ms late at most): cancelled then, for a cancel.
			seen := make(chan time.Time, 1)
			go func() {
				if runningContainer(ctx, &e, ownerID()) != "" {
					seen <- time.Now()
					if c.cancel {
						cancel()
					}
				}
			}()
			res, err := e.Run(ctx, call)
			end := time.Now()
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			wantStatus, wantCode := invoke.StatusTimeout, invoke.CodeTimeout
			if c.cancel {
				wantStatus, wantCode = invoke.StatusError, invoke.CodeCancelled
			}
			var ran time.Time
			select {
			case ran = <-seen:
			default:
				t.Fatal("the container was never seen running")
			}
			t.Logf("%s: %s %s, exit %d, %s after its container was seen running", c.name, res.Status, res.Error, res.ExitCode, end.Sub(ran).Round(time.Millisecond))
			if res.Status != wantStatus || res.Error == nil || res.Error.Code != wantCode || res.ExitCode != 137 {
				t.Errorf("status %s, exit %d, %+v; want %s (%s), exit 137: SIGKILLed after the dropped SIGTERM", res.Status, res.ExitCode, res.Error, wantStatus, wantCode)
			}
			// Exit status 137: the SIGKILL ended it, the SIGTERM
			// dropped (a pid 1 it ended would give 143, or its own
			// status). A cancel, sent when the container was seen
			// running, is followed by the SIGKILL at the grace's end,
			// not before. And the executor's SIGKILL ended it, not
			// podman's backstop (run --timeout, which conmon applies
			// timeout + grace + 5 s after the container started, and a
			// hang would have waited for).
			if d := end.Sub(ran); c.cancel && d < grace {
				t.Errorf("the run ended %s after its cancel, before the %s grace", d, grace)
			}
			if d := end.Sub(ran); !c.cancel && d > timeoutMS*time.Millisecond+grace+(backstopSeconds-1)*time.Second || c.cancel && d > grace+30*time.Second {
				t.Errorf("the run ended %s after its container ran: not the executor's SIGKILL at the grace's end", d)
			}
			name := "cruxprov-" + res.AttemptID + "-"
			out, err := e.podmanOut(context.Background(), "ps", "--all", "--filter", "name="+name, "--format", "{{.Names}}")
			if err != nil || strings.TrimSpace(string(out)) != "" {
				t.Errorf("containers left: %q (%v)", out, err)
			}
			r, err := receipts.Scan(context.Background(), []string{ledger}, receipts.ScanOptions{})
			if err != nil || len(r.Attempts) != 1 || r.Attempts[0].Outcome == nil || string(r.Attempts[0].Outcome.Status) != string(wantStatus) {
				t.Errorf("receipt: %v %+v; want one attempt, %s", err, r, wantStatus)
			}
		})
	}
}

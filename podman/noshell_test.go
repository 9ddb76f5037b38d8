package podman

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/image"
	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/receipts"
)

// shellsSeen is run in the container instead of the harness (through the
// shim as every run is): the shells it can find, by the names
// imagetest.Shells in every directory of PATH and the usual bin
// directories, and every path /etc/shells lists.
const shellsSeen = `
import json, os, sys
req = json.loads(sys.stdin.readline())
names = json.loads(sys.argv[1])
dirs = os.environ.get("PATH", "").split(":") + ["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"]
found = sorted({os.path.join(d, n) for d in dirs if d for n in names if os.path.lexists(os.path.join(d, n))})
listed = [l.strip() for l in open("/etc/shells") if l.strip() and not l.startswith("#")] if os.path.exists("/etc/shells") else []
found += [p for p in listed if os.path.lexists(p) and p not in found]
print(json.dumps({"status": "ok", "run_id": req["run_id"], "result": {"found": found, "listed": listed}, "egress": []}))
`

// TestRunWithoutAShell: a provider's image need not hold a shell. The
// fixture provider built on the bookworm base with every shell removed
// (sh, dash, bash, rbash: imagetest.ShellFree) runs end to end as any
// other: cruxshim is the entrypoint, takes the secrets from the pipe and
// starts the harness without a shell, and the run's receipt (intent and
// outcome) is in the ledger. No test ran a container without /bin/sh,
// where a shell anywhere in the run path (an entrypoint script, podman's
// own, a sh -c) would fail every such image.
func TestRunWithoutAShell(t *testing.T) {
	installed(t)
	ctx := context.Background()
	var unenforced bool
	if os.Getuid() != 0 {
		// The limits are not what this test is about: where rootless
		// podman cannot apply them it runs without them, as
		// TestRootlessChild's battery does (usable skips instead).
		_, err := (&Executor{}).cgroupLimits(ctx)
		unenforced = err != nil
	}
	// Made by MkdirTemp beside the others, not in t.TempDir(), whose
	// uppercase test name podman takes as no image name (stagingDirs).
	dir, err := os.MkdirTemp("", "cruxprov-podman-noshell-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	base, gone := imagetest.ShellFree(t, filepath.Join(dir, "base"))
	f, err := invoketest.BuildContainer(ctx, filepath.Join(dir, "fx"), base, imagetest.Shim(t), imagetest.Platform)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := image.ParseRef(f.Image)
	if err != nil {
		t.Fatal(err)
	}
	m, err := (&Executor{}).manifest(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// What the runs pull into podman's storage goes with the test; not
	// --force: a container of it left would be a failure to see.
	t.Cleanup(func() {
		if out, err := exec.Command("podman", "rmi", "--ignore", m.Config.Digest.Hex).CombinedOutput(); err != nil {
			t.Logf("removing the shell-free image: %v\n%s", err, out)
		}
	})
	secrets := map[string]string{"acme/alpha": "alpha-value", "acme/beta": "beta-value"}

	// The image has no shell to find.
	names, _ := json.Marshal(imagetest.Shells)
	e := &Executor{UnenforcedLimits: unenforced, command: []string{"/opt/cruxprov/env/bin/python", "-I", "-c", shellsSeen, string(names)}}
	res, err := e.Run(ctx, f.Call("probe", nil, secrets))
	if err != nil {
		t.Fatal(err)
	}
	var seen struct{ Found, Listed []string }
	if res.Status != invoke.StatusOK || json.Unmarshal(res.Value, &seen) != nil {
		t.Fatalf("looking for shells: %s %+v %s", res.Status, res.Error, res.Value)
	}
	if len(seen.Found) != 0 || len(seen.Listed) == 0 {
		t.Fatalf("the image without a shell (%v removed) holds %v (/etc/shells lists %v)", gone, seen.Found, seen.Listed)
	}

	// The provider runs, and its receipt is written.
	ledger := filepath.Join(dir, "receipts.jsonl")
	l, err := receipts.Open(ctx, ledger, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = (&Executor{Ledger: l, UnenforcedLimits: unenforced}).Run(ctx, f.Call("probe", nil, secrets))
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Secrets map[string]string `json:"secrets"`
		Cmdline string            `json:"cmdline"`
	}
	if res.Status != invoke.StatusOK || res.ExitCode != 0 || json.Unmarshal(res.Value, &p) != nil {
		t.Fatalf("the run without a shell: %s, exit %d, %+v %s", res.Status, res.ExitCode, res.Error, res.Value)
	}
	if len(p.Secrets) != 2 || !strings.Contains(p.Cmdline, "cruxible_provider_runtime") {
		t.Errorf("the provider saw secrets %v, ran as %q; want both secrets, under the harness", p.Secrets, p.Cmdline)
	}
	sr, err := receipts.Scan(ctx, []string{ledger}, receipts.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil {
		t.Fatalf("the ledger holds %d attempts, %d orphans; want the run's intent and outcome", len(sr.Attempts), len(sr.Orphans))
	}
	a := sr.Attempts[0]
	if a.Intent.AttemptID != res.AttemptID || a.Intent.Backend != "container" || a.Outcome.Status != receipts.StatusOK ||
		a.Outcome.ExitCode != 0 || a.Outcome.ResultDigest != digest.Sum(res.Value).String() {
		t.Errorf("the receipt: intent %+v, outcome %+v; want the run's, ok, exit 0, its result's digest", a.Intent, a.Outcome)
	}
}

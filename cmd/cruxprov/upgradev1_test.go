package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpgradeV1Approvals: over a registry an older cruxprov approved
// (registry/testdata/approvals-v1, written by 38d2118: every approval in
// the v1 form), verify and key list name the change-set to approve again
// with the command that does it, and that command, run, replaces the
// approval and says so — the trust step, then the pin — after which
// registry log --verify audits. Before, they advised restoring
// trust.json from a copy (every copy holds the same approvals), and the
// approve they would have needed was refused with it.
func TestUpgradeV1Approvals(t *testing.T) {
	const (
		pin  = "sha256:9f9397424138d1540064e8764b88bcd3377be1396a0ac4468e3ba8fe75e3c359"
		step = "sha256:d1ba202edfa06a62d3ee2f1d13c0fdb7508ac616740e486109f3a5f176813660"
	)
	fx := filepath.Join("..", "..", "registry", "testdata", "approvals-v1")
	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, "registry"), os.DirFS(filepath.Join(fx, "registry"))); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=demo-password", "XDG_STATE_HOME="+filepath.Join(home, "state"))
		return runCmd(t, cmd)
	}
	advises := func(r result, id, what string) {
		t.Helper()
		wantRefusal(t, r, "signature_invalid", what)
		if !strings.Contains(r.stderr, "v1 form") || strings.Contains(r.stderr, "restore") || !strings.Contains(r.stderr, "cruxprov changeset approve "+id+" --key KEY") {
			t.Errorf("%s: want the advice to approve %s again: %+v", what, id, r)
		}
	}
	advises(run("verify", "acme-echo"), step, "verify")
	advises(run("key", "list"), step, "key list")
	advises(run("registry", "log", "--verify"), step, "registry log --verify")
	key := filepath.Join(fx, "alice.key")
	if r := run("changeset", "approve", step, "--key", key); r.code != 0 || !strings.Contains(r.stdout, "renewed "+step+": this key's approval was in the v1 form") {
		t.Fatalf("the step approved again: %+v", r)
	}
	advises(run("verify", "acme-echo"), pin, "verify after the step")
	if r := run("changeset", "approve", pin, "--key", key); r.code != 0 || !strings.Contains(r.stdout, "in the v1 form") || !strings.Contains(r.stdout, "accepted: acme-echo at revision 1") {
		t.Fatalf("the pin approved again: %+v", r)
	}
	if r := run("registry", "log", "--verify"); r.code != 0 || !strings.Contains(r.stdout, "trust state and accepted pins verified") {
		t.Fatalf("the audit after both: %+v", r)
	}
	if r := run("key", "list"); r.code != 0 || !strings.Contains(r.stdout, "bob") {
		t.Fatalf("key list after both: %+v", r)
	}
}

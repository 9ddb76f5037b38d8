package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/sign"
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

// TestUpgradeV1TrustLostAdviceEnds: trust.json lost in a registry an
// older cruxprov approved. Every command refused it advising registry
// repair --root-key PUB; the repair refused (signature_invalid: the
// step was approved in the v1 form) advising to approve that step
// again; and the approve refused advising the repair: the advice went
// round. Following the printed advice from registry log --verify now
// ends in a registry that audits, in the fewest steps: the repair (which
// writes trust.json back with its v1 approvals, checked over that form,
// and says the step to approve again), the step approved again, the pin
// approved again.
func TestUpgradeV1TrustLostAdviceEnds(t *testing.T) {
	fx := filepath.Join("..", "..", "registry", "testdata", "approvals-v1")
	home := t.TempDir()
	if err := os.CopyFS(filepath.Join(home, "registry"), os.DirFS(filepath.Join(fx, "registry"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(home, "registry", "trust.json")); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(fx, "alice.key")
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := sign.LoadPrivateKey(pem, []byte("demo-password"))
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(home, "alice.pub") // what its first key trust was given
	if err := os.WriteFile(pub, alice.Public().PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=demo-password", "XDG_STATE_HOME="+filepath.Join(home, "state"))
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	// advice is the command a refusal's "to fix:" or a repair's "to do
	// it:" names, with the placeholders filled in as the operator does
	// (and its --home, this store's, left to run).
	advice := func(r result) []string {
		t.Helper()
		re := regexp.MustCompile(`; to (?:fix|do it): (cruxprov [^;\n]*)`)
		m := re.FindStringSubmatch(r.stderr + r.stdout)
		if m == nil {
			return nil
		}
		var args []string
		fs := strings.Fields(m[1])[1:]
		if i := slices.Index(fs, "--home"); i >= 0 && i+1 < len(fs) && fs[i+1] == home {
			fs = slices.Delete(fs, i, i+2) // run gives it
		}
		for _, a := range fs {
			switch a {
			case "PUB":
				a = pub
			case "KEY":
				a = keyFile
			}
			args = append(args, a)
		}
		return args
	}
	audit := func() result { t.Helper(); return run("registry", "log", "--verify") }
	r := audit()
	wantRefusal(t, r, "registry_corrupt", "the audit, trust.json lost")
	var took []string
	for next := advice(r); ; {
		if next == nil {
			t.Fatalf("no advice to follow after %q: %+v", took, r)
		}
		line := strings.Join(next, " ")
		if slices.Contains(took, line) {
			t.Fatalf("the advice went round: %q, then %q again: %+v", took, line, r)
		}
		if took = append(took, line); len(took) > 3 {
			t.Fatalf("more steps than the repair and two approvals: %q", took)
		}
		r = run(next...)
		if r.code == 0 {
			if next = advice(r); next != nil {
				continue // the repair's next step
			}
			if r = audit(); r.code == 0 {
				break
			}
		}
		next = advice(r)
	}
	want := []string{"registry repair --root-key " + pub, "changeset approve sha256:d1ba", "changeset approve sha256:9f93"}
	for i, w := range want {
		if i >= len(took) || !strings.HasPrefix(took[i], w) {
			t.Fatalf("steps taken %q; want %q", took, want)
		}
	}
	if r := run("key", "list"); r.code != 0 || !strings.Contains(r.stdout, "alice (root)") || !strings.Contains(r.stdout, "bob") {
		t.Errorf("key list at the end: %+v", r)
	}
}

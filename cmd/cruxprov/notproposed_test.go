package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestNotProposedSaysWhatToDo: approving or rejecting a change-set that is
// no longer proposed, and untrusting a name no key has, say what to do
// instead. They said only "change-set … is approved, not proposed" and "no
// trusted key is named …": an operator who raised the threshold to 2 and
// followed pin_unapproved's advice to the list tried to add the second
// key's approval to the pin's own change-set, and was left there.
func TestNotProposedSaysWhatToDo(t *testing.T) {
	home, id, alice, env := proposedHome(t)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	bob := filepath.Join(home, "bob")
	if r := run("key", "generate", "--out", bob); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if r := run("changeset", "approve", id, "--key", alice); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	r := run("changeset", "approve", id, "--key", bob+".key")
	if r.code != exitRefused || !strings.Contains(r.stderr, "is approved, not proposed: only a proposed change-set is approved") ||
		!strings.Contains(r.stderr, "propose it again (install it)") ||
		!strings.Contains(r.stderr, "to fix: cruxprov install acme-echo==1.0 --sha256 ") || !strings.Contains(r.stderr, "--home "+home) {
		t.Errorf("approve of an approved change-set: %+v", r)
	}
	r = run("changeset", "approve", id, "--key", bob+".key", "--json")
	var doc struct {
		Refused struct {
			Remedy struct{ Action, Target string }
		}
	}
	if json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Remedy.Action != "propose" || !strings.HasPrefix(doc.Refused.Remedy.Target, "acme-echo==1.0@sha256:") {
		t.Errorf("--json: %+v", r)
	}
	if r := run("changeset", "reject", id, "--reason", "too late"); r.code != exitRefused || !strings.Contains(r.stderr, "an accepted provider is withdrawn by retiring it (acme-echo); to fix: cruxprov provider retire acme-echo --home "+home) {
		t.Errorf("reject of an approved change-set: %+v", r)
	}
	if r := run("key", "untrust", "nobody"); r.code != exitRefused || !strings.Contains(r.stderr, "no trusted key is named nobody; the registry's trusted keys are listed by name; to fix: cruxprov key list --home "+home) {
		t.Errorf("untrust of a name no key has: %+v", r)
	}
}

// TestPolicySetToTheThresholdInForce: policy set to the threshold in
// force (run again after its change-set was approved) proposes nothing
// and says so, exit 0, as key trust of a key trusted already does; it
// proposed a change-set that changed nothing.
func TestPolicySetToTheThresholdInForce(t *testing.T) {
	home, _, _, env := proposedHome(t)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	count := func() int {
		t.Helper()
		var doc struct{ ChangeSets []any }
		if r := run("changeset", "list", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil {
			t.Fatalf("%+v", r)
		}
		return len(doc.ChangeSets)
	}
	before := count()
	if r := run("policy", "set", "--threshold", "1"); r.code != 0 || r.stdout != "threshold 1 already (trust revision 0): nothing changed\n" {
		t.Errorf("policy set --threshold 1 at threshold 1: %+v", r)
	}
	r := run("policy", "set", "--threshold", "1", "--json")
	var doc struct {
		Schema    string
		Threshold int
		Already   bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Schema != "cruxprov.policy.set/v1" || doc.Threshold != 1 || !doc.Already {
		t.Errorf("--json: %+v", r)
	}
	if n := count(); n != before {
		t.Errorf("%d change-sets after, %d before: one was proposed", n, before)
	}
}

// TestInstallAgainChangesNothing: install run again on an accepted pin
// with nothing changed proposes an update that changes nothing, and both
// install and changeset diff say what approving it is for; the diff said
// only "Plan: 0 changes.". The diff of a change-set approved or rejected
// says so (it said "revision 2 → 2" of the accepted pin's own).
func TestInstallAgainChangesNothing(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	_, must, approveInstall := approvingStore(t, w, base, "/usr/bin/python3.11")
	approveInstall()
	r := must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile")
	if !strings.Contains(r.stdout, "it changes nothing in acme-echo's accepted pin (revision 1): approving it only approves the accepted pin again") {
		t.Errorf("install again: %+v", r)
	}
	id := strings.Fields(strings.SplitAfter(r.stdout, "proposed change-set ")[1])[0]
	if r := must("changeset", "diff", id); !strings.Contains(r.stdout, "  nothing changes: approving it only approves the accepted pin again") || !strings.HasSuffix(r.stdout, "Plan: 0 changes.\n") {
		t.Errorf("changeset diff: %+v", r)
	}
	// Once approved, its diff says it is decided, and no longer what
	// approving it is for ("revision 1 → 1", the note as if open).
	if r := must("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key")); !strings.Contains(r.stdout, "accepted") {
		t.Fatalf("approve: %+v", r)
	}
	if r := must("changeset", "diff", id); !strings.Contains(r.stdout, "(approved, not open): update acme-echo at revision 2, against what is current now (revision 2)") || strings.Contains(r.stdout, "approving it") {
		t.Errorf("changeset diff of an approved change-set: %+v", r)
	}
	// A first install says nothing of the kind.
	if r := must("install", w.echo2, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile"); strings.Contains(r.stdout, "changes nothing") {
		t.Errorf("an upgrade: %+v", r)
	}
}

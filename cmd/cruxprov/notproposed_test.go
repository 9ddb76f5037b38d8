package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
		!strings.Contains(r.stderr, "propose it again (cruxprov install)") ||
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
	if r := run("changeset", "reject", id, "--reason", "too late"); r.code != exitRefused || !strings.Contains(r.stderr, "an accepted provider is withdrawn with cruxprov provider retire acme-echo") {
		t.Errorf("reject of an approved change-set: %+v", r)
	}
	if r := run("key", "untrust", "nobody"); r.code != exitRefused || !strings.Contains(r.stderr, "no trusted key is named nobody; cruxprov key list names the trusted keys") {
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

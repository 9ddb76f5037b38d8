package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallAgainSaysWhyThePinDoesNotRun: install run again with nothing
// changed, on a pin whose approver key was untrusted since, said that
// approving its change-set is "what a threshold raised since needs" (the
// governance.md walk as cruxprov-rootless): the threshold never changed.
// The note says the pin's actual state, as verify finds it: here the
// untrusted key (signer_untrusted), naming it; for a pin that runs, that
// nothing needs it. changeset diff says the same.
func TestInstallAgainSaysWhyThePinDoesNotRun(t *testing.T) {
	base, w, _, must := govWalkStore(t)
	keys := filepath.Join(base, "keys")
	install := func() result {
		t.Helper()
		return must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile")
	}
	idOf := func(r result) string {
		t.Helper()
		return strings.Fields(strings.SplitAfter(r.stdout, "proposed change-set ")[1])[0]
	}
	must("key", "generate", "--out", filepath.Join(keys, "bob"))
	bob := csOf(t, must("key", "trust", filepath.Join(keys, "bob.pub"), "--name", "bob", "--json"))
	must("changeset", "approve", bob, "--key", filepath.Join(keys, "k.key"))
	must("changeset", "approve", idOf(install()), "--key", filepath.Join(keys, "bob.key")) // acme-echo approved by bob alone
	// The pin runs: nothing needs the same pin approved again.
	r := install()
	if !strings.Contains(r.stdout, "it changes nothing in acme-echo's accepted pin (revision 1)") || !strings.Contains(r.stdout, "runs as it is") || strings.Contains(r.stdout, "threshold") {
		t.Errorf("install again on a pin that runs: %+v", r)
	}
	// It names the command that rejects it, which runs as printed (with
	// a reason for TEXT): it said "reject it" and no more.
	_, cmdline, ok := strings.Cut(r.stdout, "reject it: ")
	if !ok {
		t.Fatalf("install again names no reject command: %q", r.stdout)
	}
	args := strings.Fields(strings.SplitN(cmdline, "\n", 2)[0])
	if len(args) < 6 || args[0] != "cruxprov" || strings.Join(args[1:3], " ") != "changeset reject" || args[3] != idOf(r)[len("sha256:"):][:12] {
		t.Fatalf("reject command: %q", args)
	}
	for i, a := range args {
		if a == "TEXT" {
			args[i] = "nothing-changes"
		}
	}
	if rr := cruxprov(t, args[1:]...); rr.code != 0 || !strings.Contains(rr.stdout, "rejected "+idOf(r)) {
		t.Fatalf("the reject command as printed: %+v", rr)
	}
	un := csOf(t, must("key", "untrust", "bob", "--json"))
	must("changeset", "approve", un, "--key", filepath.Join(keys, "k.key"))
	r = install()
	id := idOf(r)
	for what, out := range map[string]string{"install again": r.stdout, "changeset diff": must("changeset", "diff", id).stdout} {
		if strings.Contains(out, "threshold raised") || !strings.Contains(out, "does not run now: signer_untrusted") || !strings.Contains(out, "the approval by bob") {
			t.Errorf("%s on a pin whose approver key was untrusted: %q", what, out)
		}
	}
	// And approving it is what makes the pin run again.
	must("changeset", "approve", id, "--key", filepath.Join(keys, "k.key"))
	must("verify", "acme-echo")
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestApproveRefusedBeforeTheKey: changeset approve of a change-set that
// no key can approve — stale, rejected, accepted and replaced since,
// unknown — refuses it before it reads the key or asks for its password
// (the governance.md walk as cruxprov-rootless: it asked for the
// passphrase, then said no). Here the key file does not exist and no
// password is given: the refusal is the change-set's, not a usage error
// about the key.
func TestApproveRefusedBeforeTheKey(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b", "c")
	akey := filepath.Join(keys, "a.key")
	propose := func(args ...string) string { t.Helper(); return proposeQuiet(t, run, args...) }
	b := propose("key", "trust", filepath.Join(keys, "b.pub"))
	c := propose("key", "trust", filepath.Join(keys, "c.pub")) // stale once b is approved
	if r := run("changeset", "approve", b, "--key", akey); r.code != 0 {
		t.Fatalf("approve b: %+v", r)
	}
	rejected := propose("policy", "set", "--threshold", "2")
	if r := run("changeset", "reject", rejected, "--reason", "not yet"); r.code != 0 {
		t.Fatalf("reject: %+v", r)
	}
	replaced := b // the trust state's last step no more once b is untrusted
	p := propose("key", "untrust", "b")
	if r := run("changeset", "approve", p, "--key", akey); r.code != 0 {
		t.Fatalf("approve the untrust: %+v", r)
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CRUXPROV_KEY_PASSWORD=") {
			env = append(env, e)
		}
	}
	noKey := filepath.Join(keys, "missing.key")
	for _, x := range []struct{ what, id, code string }{
		{"stale", c, "changeset_stale"},
		{"rejected", rejected, "changeset_invalid"},
		{"accepted and replaced since", replaced, "changeset_invalid"},
		{"unknown", strings.Repeat("0", 64), "changeset_invalid"},
	} {
		t.Run(x.what, func(t *testing.T) {
			cmd := exec.Command(bin, "--home", home, "changeset", "approve", x.id, "--key", noKey)
			cmd.Env = env
			wantRefusal(t, runCmd(t, cmd), x.code, x.what+", without the key")
		})
	}
	// What the key decides still needs it: the trust state's last step,
	// approved again, is "approved already" for a key that approved it.
	if r := run("changeset", "approve", p, "--key", akey); r.code != 0 || !strings.Contains(r.stdout, "approved already") {
		t.Errorf("approving the last step again: %+v", r)
	}
	cmd := exec.Command(bin, "--home", home, "changeset", "approve", p, "--key", noKey)
	cmd.Env = env
	if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, "missing.key") {
		t.Errorf("the last step without its key: %+v", r)
	}
}

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyNeverProposedAdvisesInstall: verify of a provider nothing
// proposed advises proposing it (the install), and once its change-set
// is proposed, approving that one, by id; the advised approval runs. It
// advised `cruxprov changeset list` either way, which listed nothing
// where nothing was proposed.
func TestVerifyNeverProposedAdvisesInstall(t *testing.T) {
	home := t.TempDir()
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(home, "state"))
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	key := filepath.Join(home, "alice")
	for _, args := range [][]string{{"key", "generate", "--out", key}, {"key", "trust", key + ".pub", "--name", "alice"}} {
		if r := run(args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	r := run("verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_unapproved: provider acme-echo has no accepted pin, and no change-set of it is proposed: propose it") ||
		!strings.Contains(r.stderr, "to fix: cruxprov install WHEEL --platform PLATFORM --python PYTHON --index URL --home "+home) || strings.Contains(r.stderr, "changeset list") {
		t.Errorf("verify of a provider never proposed: %+v", r)
	}
	r = run("verify", "acme-echo", "--json")
	var doc struct {
		Refused struct {
			Code   string
			Remedy struct{ Action, Target string }
		}
	}
	if json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Refused.Code != "pin_unapproved" || doc.Refused.Remedy.Action != "propose" || doc.Refused.Remedy.Target != "acme-echo" {
		t.Errorf("verify --json of a provider never proposed: %+v", r)
	}

	id := proposeEcho(t, home)
	r = run("verify", "acme-echo")
	want := "to fix: cruxprov changeset approve " + id + " --key KEY --home " + home
	if r.code != exitRefused || !strings.Contains(r.stderr, "its change-set "+id+" is proposed, not yet approved") || !strings.Contains(r.stderr, want) {
		t.Fatalf("verify of a provider proposed: %+v", r)
	}
	if r := run("changeset", "approve", id, "--key", key+".key"); r.code != 0 {
		t.Errorf("the advised approval: %+v", r)
	}
	if r := run("verify", "acme-echo"); strings.Contains(r.stderr, "pin_unapproved") {
		t.Errorf("verify after the advised approval: %+v", r)
	}
}

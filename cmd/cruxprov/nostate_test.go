package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusedVerifyMakesNoStateDir: verify and run refused before the pin
// is accepted (an entrypoint it does not have, a provider with no pin, a
// bad flag) under a --state-dir that does not exist yet leave nothing
// there. Before, `verify NAME --entrypoint E` and `run NAME E` refused
// entrypoint_unknown had made DIR and DIR/floors with the floor in it
// (the pin had verified, and its floor was raised before the entrypoint
// was looked up). A verify that gets past the pin makes the floor.
func TestRefusedVerifyMakesNoStateDir(t *testing.T) {
	home, id, key, env := proposedHome(t)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	if r := run("changeset", "approve", id, "--key", key); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	input := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(input, []byte(`{"hello":"world"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify", "acme-echo", "--entrypoint", "nope"}, exitRefused, "refused: entrypoint_unknown: "},
		{[]string{"verify", "acme-echo", "--entrypoint", "nope", "--backend", "container"}, exitRefused, "refused: entrypoint_unknown: "},
		{[]string{"run", "acme-echo", "nope", "--input", input}, exitRefused, "refused: entrypoint_unknown: "},
		{[]string{"verify", "acme-nope"}, exitRefused, "refused: pin_unapproved: "},
		{[]string{"run", "acme-nope", "echo", "--input", input}, exitRefused, "refused: pin_unapproved: "},
		{[]string{"verify", "acme-echo", "--backend", "bogus"}, exitUsage, "usage: "},
		{[]string{"run", "acme-echo", "echo", "--input", input, "--timeout", "0s"}, exitUsage, "usage: "},
	} {
		state := filepath.Join(base, "state")
		r := run(append(tc.args, "--state-dir", state)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Fatalf("%v: want exit %d and %q: %+v", tc.args, tc.code, tc.want, r)
		}
		if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v refused (%s), and the state directory it was given is there now (%v)", tc.args, strings.TrimSpace(r.stderr), err)
			os.RemoveAll(state)
		}
	}
	// Past the pin (the pinned env is not there, which is refused once
	// the pin named it): the floor is raised.
	state := filepath.Join(base, "state")
	run("verify", "acme-echo", "--entrypoint", "echo", "--state-dir", state)
	if fs, err := filepath.Glob(filepath.Join(state, "floors", "*.json")); err != nil || len(fs) != 1 {
		t.Errorf("verify past the pin: floors %v (%v), want one", fs, err)
	}
}

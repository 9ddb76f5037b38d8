package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestUnwrittenRegistryReadOnlyStore: a store whose registry no writer
// ever opened (env create leaves registry/ empty) and that this user
// cannot write (an executor, DESIGN §14): gc --dry-run answers, needing no
// write access, and env remove says the store is not writable by this
// user. Both were refused registry_corrupt ("treat as tampering: restore
// the registry") because opening the registry tried to make its
// directories.
func TestUnwrittenRegistryReadOnlyStore(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-unwritten-registry-", envPython)
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	home, lock := envHomeAt(t, home, 1, 2)
	out := createJSON(t, createArgs(home, lock, "--no-compile")...)
	reg := filepath.Join(home, "registry")
	if ents, err := os.ReadDir(reg); err == nil && len(ents) != 0 {
		t.Fatalf("env create wrote the registry: %v", ents)
	}
	nobody := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		return runCmd(t, cmd)
	}
	r := nobody("gc", "--dry-run")
	if r.code != 0 || strings.Contains(r.stderr, string(refusal.RegistryCorrupt)) || !strings.Contains(r.stdout, "would remove") {
		t.Errorf("gc --dry-run as a user who cannot write the store: %+v", r)
	}
	r = nobody("gc", "--dry-run", "--envs")
	if r.code != 0 || !strings.Contains(r.stdout, "would remove envs/"+filepath.Base(out.Path)) {
		t.Errorf("gc --dry-run --envs as a user who cannot write the store: %+v", r)
	}
	// A store missing a directory this user cannot make (an operator
	// removed the unused oci/, a store from before receipts/) still reads.
	for _, d := range []string{"oci", "receipts"} {
		if err := os.Remove(filepath.Join(home, d)); err != nil {
			t.Fatal(err)
		}
	}
	r = nobody("gc", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would remove") {
		t.Errorf("gc --dry-run as a user who cannot write a store missing oci/ and receipts/: %+v", r)
	}
	r = nobody("env", "remove", out.Path)
	if r.code == 0 || strings.Contains(r.stderr, string(refusal.RegistryCorrupt)) || !strings.Contains(r.stderr, "writable") {
		t.Errorf("env remove as a user who cannot write the store: %+v", r)
	}
	if _, err := os.Stat(out.Path); err != nil {
		t.Errorf("the env is gone: %v", err)
	}
	if ents, _ := os.ReadDir(reg); len(ents) != 0 {
		t.Errorf("the registry was written: %v", ents)
	}
	// A registry with a history but neither directory has lost its pins
	// and change-sets: refused, so gc keeps nothing it should not.
	key := filepath.Join(base, "alice")
	t.Setenv("CRUXPROV_KEY_PASSWORD", "test password")
	if r := cruxprov(t, "--home", home, "key", "generate", "--out", key, "--quiet"); r.code != 0 {
		t.Fatalf("key generate: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "key", "trust", key+".pub", "--name", "alice"); r.code != 0 {
		t.Fatalf("key trust: %+v", r)
	}
	for _, d := range []string{"changesets", "pins"} {
		if err := os.RemoveAll(filepath.Join(reg, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(reg, 0o755); err != nil {
		t.Fatal(err)
	}
	r = nobody("gc", "--dry-run")
	if r.code != exitRefused || !strings.Contains(r.stderr, string(refusal.RegistryCorrupt)) {
		t.Errorf("gc --dry-run of a registry with a history and no pins/ or change-sets/: %+v", r)
	}
	// The owner still can.
	if r := cruxprov(t, "--home", home, "env", "remove", out.Path); r.code != 0 {
		t.Errorf("env remove as the owner: %+v", r)
	}
}

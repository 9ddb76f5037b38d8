package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
)

// TestRegistryChangeByAnotherUser: a registry change (key trust, policy
// set, changeset approve and reject) by a user who may not write the
// registry failed with a plain error (exit 1, "run as the store's
// owner"). It is a refusal now, registry_write_failed (it was
// registry_corrupt, "not damage", under a code whose advice is to restore
// the registry from a copy), saying nothing was changed and whose the
// registry is, refused before a key's password; where another user owns the registry (root's, changed as uid
// 65534), its advice is the same command run as that owner, with the
// store named, which, run as printed (sudo played by setpriv), makes the
// change. As another user than root, the test changes a registry of its
// own whose modes it took away: refused so, with no owner to run as.
func TestRegistryChangeByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		home, keys, run := keyedHome(t, "a", "b")
		id := strings.TrimSpace(mustRun(t, run, "--quiet", "key", "trust", filepath.Join(keys, "b.pub")).stdout)
		reg := filepath.Join(home, "registry")
		t.Cleanup(func() { testdir.Writable(reg) })
		os.Chmod(filepath.Join(reg, ".lock"), 0o444)
		os.Chmod(reg, 0o555)
		r := run("changeset", "approve", id, "--key", filepath.Join(keys, "a.key"))
		wantRefusal(t, r, string(refusal.RegistryWriteFailed), "approve in a registry of this user's, its modes taken away")
		lock := filepath.Join(reg, ".lock")
		if !strings.Contains(r.stderr, "so nothing was changed") || !strings.Contains(r.stderr, "give it back (chmod u+w "+lock+")") || strings.Contains(r.stderr, "to fix:") {
			t.Errorf("approve: %+v; want nothing changed, chmod u+w %s, and no owner to run as", r, lock)
		}
		return
	}
	asuser.Require(t, "run as uid 65534")
	base := asuser.Dir(t, "cruxprov-registry-notowner-")
	exe := asuser.Copy(t, base, bin)
	home := filepath.Join(base, "home")
	keys := filepath.Join(base, "keys")
	root := func(args ...string) result {
		cmd := exec.Command(exe, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	for _, n := range []string{"a", "b"} {
		mustRun(t, root, "key", "generate", "--out", filepath.Join(keys, n))
	}
	mustRun(t, root, "key", "trust", filepath.Join(keys, "a.pub"))
	id := strings.TrimSpace(mustRun(t, root, "--quiet", "key", "trust", filepath.Join(keys, "b.pub")).stdout)
	os.Chmod(keys, 0o755)
	os.Chmod(filepath.Join(keys, "a.key"), 0o644) // the child may read it: what refuses it is the registry
	nobody := func(args ...string) result {
		cmd := asuser.Command(65534, 65534, exe, args...)
		cmd.Dir = base
		cmd.Env = []string{"PATH=/usr/bin:/bin", "CRUXPROV_HOME=" + home, "CRUXPROV_KEY_PASSWORD=pw", "HOME=" + base}
		return runCmd(t, cmd)
	}
	log, err := os.ReadFile(filepath.Join(home, "registry", "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	fixRE := regexp.MustCompile(`; to fix: (sudo -u root cruxprov .*)$`)
	var advice string
	for _, args := range [][]string{
		{"policy", "set", "--threshold", "2"},
		{"changeset", "reject", id, "--reason", "no"},
		{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key")},
	} {
		r := nobody(args...)
		wantRefusal(t, r, string(refusal.RegistryWriteFailed), strings.Join(args, " ")+" as uid 65534")
		m := fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
		if !strings.Contains(r.stderr, "so nothing was changed") || !strings.Contains(r.stderr, "this registry is owned by root (uid 0), and this user (uid 65534) may not write it: run the command as root, or ask them to") || m == nil ||
			!strings.HasSuffix(m[1], " --home "+home) || !strings.Contains(m[1], " "+strings.Join(args, " ")) {
			t.Fatalf("%v as uid 65534: %+v\nwant it said to be no damage, advising the command run as root with its store", args, r)
		}
		advice = m[1]
	}
	if b, _ := os.ReadFile(filepath.Join(home, "registry", "log.jsonl")); string(b) != string(log) {
		t.Error("a refused change wrote to the history")
	}
	// The approve's advice, run as printed: sudo -u root, played by a
	// shim (this host may have no sudo) that runs the rest as that user.
	shim := filepath.Join(base, "shim")
	os.Mkdir(shim, 0o755)
	os.WriteFile(filepath.Join(shim, "sudo"), []byte("#!/bin/sh\n[ \"$1\" = -u ] || exit 2\nu=$2; shift 2\nexec setpriv --reuid=\"$u\" --regid=\"$u\" --init-groups -- env -i PATH=\"$PATH\" CRUXPROV_KEY_PASSWORD=pw \"$@\"\n"), 0o755)
	os.Symlink(exe, filepath.Join(shim, "cruxprov"))
	cmd := exec.Command("sh", "-c", advice)
	cmd.Dir = base
	cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
	if r := runCmd(t, cmd); r.code != 0 || !strings.Contains(r.stdout, "accepted") {
		t.Fatalf("the advice %q, run: %+v", advice, r)
	}
}

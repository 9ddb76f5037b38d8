package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/store"
)

// TestChangesetListShowsStale, as an unprivileged operator (uid 65534):
// a proposal made stale by a later trust change (approving it is refused
// changeset_stale) is listed as stale, in the table's STATE column and
// with "stale": true in --json, as changeset diff says it; it was listed
// as proposed. A current proposal is not.
func TestChangesetListShowsStale(t *testing.T) {
	_, keys, run := nobodyOperator(t, "cruxprov-liststale-")
	as := func(args ...string) result {
		t.Helper()
		r := run(args...)
		if r.code != 0 && args[1] != "approve" {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		as("key", "generate", "--out", filepath.Join(keys, n))
	}
	as("key", "trust", filepath.Join(keys, "a.pub"))
	b := csOf(t, as("key", "trust", filepath.Join(keys, "b.pub"), "--json"))
	c := csOf(t, as("key", "trust", filepath.Join(keys, "c.pub"), "--json"))
	as("changeset", "approve", b, "--key", filepath.Join(keys, "a.key"))
	wantRefusal(t, as("changeset", "approve", c, "--key", filepath.Join(keys, "a.key")), "changeset_stale", "approve the stale change-set")
	d := csOf(t, as("key", "trust", filepath.Join(keys, "d.pub"), "--json")) // current
	var doc struct {
		ChangeSets []struct {
			Metadata struct{ ID string }
			Status   struct{ State string }
			Stale    bool
		}
	}
	if err := json.Unmarshal([]byte(as("changeset", "list", "--json").stdout), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cs := range doc.ChangeSets {
		got[cs.Metadata.ID] = cs.Status.State
		if cs.Stale {
			got[cs.Metadata.ID] += " stale"
		}
	}
	if got[b] != "approved" || got[c] != "proposed stale" || got[d] != "proposed" {
		t.Errorf("changeset list --json: %v (b %s, c %s, d %s)", got, b, c, d)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(as("changeset", "list").stdout, "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 {
			rows[f[0]] = f[1]
		}
	}
	short := func(id string) string { return strings.TrimPrefix(id, "sha256:")[:12] }
	if rows[short(b)] != "approved" || rows[short(c)] != "stale" || rows[short(d)] != "proposed" {
		t.Errorf("changeset list: %v", rows)
	}
}

// nobodyOperator is an operator as uid 65534 (t skipped where it cannot
// be) owning a store HOME of its own, with a KEYS directory (0700) and
// its key password and state directory set, and a runner of cruxprov
// --home HOME as that user.
func nobodyOperator(t *testing.T, prefix string) (home, keys string, run func(args ...string) result) {
	t.Helper()
	base, exe := nobodyBase(t, prefix, "")
	home, keys = filepath.Join(base, "home"), filepath.Join(base, "keys")
	os.MkdirAll(home, 0o755)
	os.MkdirAll(keys, 0o700)
	chownTree(t, base)
	return home, keys, func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(home, ".state")}
		return runCmd(t, cmd)
	}
}

// TestGCDryRunUnreadable: gc --dry-run by a user who may read the store
// but not a private part of it (an operator's umask 077 made the unpacked
// cache 0700) says that, not that the store is not writable (a dry run
// writes nothing).
func TestGCDryRunUnreadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another user")
	}
	base, exe := nobodyBase(t, "cruxprov-gcdry-", "")
	home := filepath.Join(base, "home")
	if _, err := store.Open(home); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "cache", "unpacked-v1"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(home, "cache", "unpacked-v1"), 0o700) // the rest 0755
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home, "gc", "--dry-run")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	if r := runCmd(t, cmd); r.code != 1 || !strings.Contains(r.stderr, "a dry run reads the whole store, and this user (uid 65534) may not read that part of it") || strings.Contains(r.stderr, "not writable") {
		t.Errorf("gc --dry-run on a store with a private part: %+v", r)
	}
}

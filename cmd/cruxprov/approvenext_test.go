package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestApproveShortNamesTheNextApproval: walking governance.md as
// cruxprov-rootless with a threshold of 2, the first approval printed
// "not accepted yet: more approver keys must sign", not how many nor
// with what command (key trust and install print theirs: "approve with:
// cruxprov changeset approve ID --key KEY --home DIR"). It now says both,
// and the command it prints, run with the second key, accepts.
func TestApproveShortNamesTheNextApproval(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b", "c")
	approve := func(id, key string) result {
		t.Helper()
		r := run("changeset", "approve", id, "--key", filepath.Join(keys, key+".key"))
		if r.code != 0 {
			t.Fatalf("approve %s with %s: %+v", id, key, r)
		}
		return r
	}
	propose := func(args ...string) string { t.Helper(); return proposeQuiet(t, run, args...) }
	approve(propose("key", "trust", filepath.Join(keys, "b.pub")), "a")
	approve(propose("policy", "set", "--threshold", "2"), "a")
	id := propose("key", "trust", filepath.Join(keys, "c.pub"))
	hex := strings.TrimPrefix(id, "sha256:")[:12]
	r := approve(id, "a")
	want := "not accepted yet: 1 more approver key must sign: cruxprov changeset approve " + hex + " --key KEY --home " + home
	if !strings.Contains(r.stdout, want) {
		t.Fatalf("first of two approvals: %q does not say %q", r.stdout, want)
	}
	// Run what it says, with the other approver's key (run gives
	// --home itself).
	said, _, _ := strings.Cut(want[strings.Index(want, "cruxprov "):], " --home ")
	args := strings.Fields(strings.TrimPrefix(said, "cruxprov "))
	for i, a := range args {
		if a == "KEY" {
			args[i] = filepath.Join(keys, "b.key")
		}
	}
	if r := run(args...); r.code != 0 || !strings.Contains(r.stdout, "accepted: the trust change applies") {
		t.Fatalf("%v: %+v", args, r)
	}
}

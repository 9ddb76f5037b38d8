package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/treelist"
)

// TestApproveByBuilderKeyRefused: DESIGN §8 "a builder key ... never
// counts as an approval". changeset approve --key with a trusted builder
// key (a CI's image signing key) is refused signer_untrusted, exit 78,
// saying it is a builder key: before its password when the key file
// names its public key, after it when it does not (a key file from
// before the header, or cosign's); with --json a refusal document. The
// registry is left as it was either way, and the change-set stays
// proposed.
func TestApproveByBuilderKeyRefused(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "ci", "c")
	ci := proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "ci.pub"), "--name", "ci", "--role", "builder")
	if r := run("changeset", "approve", ci, "--key", filepath.Join(keys, "a.key")); r.code != 0 {
		t.Fatalf("a approves the builder key's trust: %+v", r)
	}
	id := proposeQuiet(t, run, "key", "trust", filepath.Join(keys, "c.pub"))
	reg := filepath.Join(home, "registry")
	before, err := treelist.Of(reg)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		after, err := treelist.Of(reg)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("%s: the refused approval changed the registry:\nbefore:\n%s\nafter:\n%s", what, before, after)
		}
	}
	builder := func(r result, what string) {
		t.Helper()
		wantRefusal(t, r, "signer_untrusted", what)
		if !strings.Contains(r.stderr, "builder") {
			t.Errorf("%s: the refusal does not say it is a builder key: %+v", what, r)
		}
	}

	// The key file names its public key: refused before the password.
	r := noPassword(t, home, "changeset", "approve", id, "--key", filepath.Join(keys, "ci.key"))
	builder(r, "builder key, no password")
	if strings.Contains(r.stderr, "no key password") {
		t.Errorf("builder key: asked for the password first: %+v", r)
	}
	unchanged("builder key, no password")
	j := noPassword(t, home, "--json", "changeset", "approve", id, "--key", filepath.Join(keys, "ci.key"))
	if doc := jsonDoc(t, j); j.code != exitRefused || doc["refused"] == nil ||
		doc["refused"].(map[string]any)["code"] != "signer_untrusted" {
		t.Errorf("builder key, --json: %+v", j)
	}
	unchanged("builder key, --json")

	// A key file without the header: opened with its password, then refused.
	bare := filepath.Join(keys, "ci-bare.key")
	withHeader(t, filepath.Join(keys, "ci.key"), "", bare)
	builder(run("changeset", "approve", id, "--key", bare), "builder key without its public key header")
	unchanged("builder key without its public key header")

	if r := run("--json", "changeset", "show", id); r.code != 0 || jsonDoc(t, r)["status"].(map[string]any)["state"] != "proposed" {
		t.Errorf("the change-set after the builder key's approvals: %+v", r)
	}
}

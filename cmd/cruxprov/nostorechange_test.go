package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
)

// TestChangeAtNoStoreMakesNone: key untrust, provider retire, policy
// set and changeset approve|reject, which a registry that trusts no key,
// accepted no pin and holds no change-set can only refuse, refuse at a --home that names nothing (a typo) without making
// anything there: they made the store (registry/, its lock) and then
// refused as an empty registry does, so that the read commands at that
// --home found a store instead of saying "there is no store at DIR". A
// directory of other things is left as it was too. So does key trust of
// a builder key (ci.md's first step of an operator's image trust, taken
// first), which a store's first key, its root of trust, cannot be.
func TestChangeAtNoStoreMakesNone(t *testing.T) {
	const someID = "sha256:f073f4514cc710faa550406ec8efdd3d4f7ba8be58bd2401e76c5f909aaf6776"
	_, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	builderPub := filepath.Join(t.TempDir(), "builder.pub")
	if err := os.WriteFile(builderPub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   refusal.Code
		detail string
	}{
		{[]string{"key", "untrust", "bob"}, refusal.SignerUntrusted, "cannot untrust key bob: "},
		{[]string{"provider", "retire", "acme-echo"}, refusal.PinUnapproved, "provider acme-echo has no accepted pin to retire: "},
		{[]string{"policy", "set", "--threshold", "2"}, refusal.SignerUntrusted, "cannot set the threshold to 2: "},
		{[]string{"changeset", "approve", someID, "--key", "alice.key"}, refusal.ChangesetInvalid, "cannot approve change-set " + someID + ": "},
		{[]string{"changeset", "reject", someID, "--reason", "no"}, refusal.ChangesetInvalid, "cannot reject change-set " + someID + ": "},
		{[]string{"key", "trust", builderPub, "--name", "ci", "--role", "builder"}, refusal.ChangesetInvalid, "cannot trust builder key ci: a store's first key is its root of trust, an approver's: "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "typo")
			want := tc.detail + noStoreAt(home)
			r := cruxprov(t, append([]string{"--home", home}, tc.args...)...)
			if r.code != exitRefused || r.stderr != "refused: "+string(tc.code)+": "+want+"\n" || r.stdout != "" {
				t.Errorf("want %q, exit 78: %+v", want, r)
			}
			if _, err := os.Lstat(home); err == nil {
				t.Fatalf("%v made %v", tc.args, tree(t, home))
			}
			r = cruxprov(t, append(append([]string{"--home", home}, tc.args...), "--json")...)
			dec := json.NewDecoder(strings.NewReader(r.stdout))
			var doc struct {
				Schema  string
				Refused *struct {
					Code   refusal.Code
					Detail string
					Remedy any
				}
			}
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("--json: stdout is no JSON document: %v: %+v", err, r)
			}
			if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) != 0 || dec.More() {
				t.Errorf("--json: stdout holds more than one document: %q", r.stdout)
			}
			if r.code != exitRefused || doc.Refused == nil || doc.Refused.Code != tc.code || doc.Refused.Detail != want || doc.Schema != schemaName(tc.args[:2]...) {
				t.Errorf("--json: want the refusal %s %q: %+v", tc.code, want, r)
			}
			if _, err := os.Lstat(home); err == nil {
				t.Fatalf("%v --json made %v", tc.args, tree(t, home))
			}

			other := t.TempDir()
			os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine\n"), 0o644)
			before := tree(t, other)
			r = cruxprov(t, append([]string{"--home", other}, tc.args...)...)
			if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(tc.code)+": "+tc.detail+"there is no store at "+other+": the directory holds other things") {
				t.Errorf("a directory of other things: %+v", r)
			}
			if after := tree(t, other); !slices.Equal(before, after) {
				t.Errorf("%v made %v in a directory of other things", tc.args, diffPaths(before, after))
			}
		})
	}
}

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

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/refusal"
)

// TestInstallAtNoStoreMakesNone: install of a provider's wheel where
// --home names no store (a typo; a directory of other things) can only be
// refused interface_unregistered, since a registry that holds no interface
// knows none of the provider's, and it made the whole store there first
// (.lock, blobs/, envs/, registry/, …): the commands that only read then
// found a store at the mistyped --home rather than saying there is none
// (walked as provider-authors.md's author: `install --home ~/t/store`
// before registering left a store there). It refuses before making
// anything, naming the interfaces and saying there is no store, and the
// advice, the registration, makes the store; the install then goes on
// past the interfaces.
func TestInstallAtNoStoreMakesNone(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	install := []string{"install", fx.Echo.Path, "--platform", "host", "--offline", "--no-compile"}
	const detail = "acme-echo implements interfaces the registry does not know: acme.echo, acme.diagnostics; register each one's schema first (which makes the store): there is no store at "

	home := filepath.Join(t.TempDir(), "typo")
	r := cruxprov(t, append([]string{"--home", home}, install...)...)
	advice := "; to fix: cruxprov interface register ID --schema FILE --home " + home + "\n"
	if r.code != exitRefused || r.stderr != "refused: "+string(refusal.InterfaceUnregistered)+": "+detail+home+"; check --home (or CRUXPROV_HOME): it must name the operator's store"+advice || r.stdout != "" {
		t.Errorf("install at a --home that names nothing: %+v", r)
	}
	if _, err := os.Lstat(home); err == nil {
		t.Fatalf("install made %v", tree(t, home))
	}
	r = cruxprov(t, append(append([]string{"--home", home}, install...), "--json")...)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var doc struct {
		Refused *struct {
			Code   refusal.Code
			Detail string
		}
	}
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("--json: stdout is no JSON document: %v: %+v", err, r)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) != 0 || dec.More() {
		t.Errorf("--json: stdout holds more than one document: %q", r.stdout)
	}
	if r.code != exitRefused || doc.Refused == nil || doc.Refused.Code != refusal.InterfaceUnregistered || !strings.HasPrefix(doc.Refused.Detail, detail+home) {
		t.Errorf("--json: %+v", r)
	}
	if _, err := os.Lstat(home); err == nil {
		t.Fatalf("install --json made %v", tree(t, home))
	}

	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine\n"), 0o644)
	before := tree(t, other)
	r = cruxprov(t, append([]string{"--home", other}, install...)...)
	if r.code != exitRefused || !strings.Contains(r.stderr, detail+other+": the directory holds other things") {
		t.Errorf("a directory of other things: %+v", r)
	}
	if after := tree(t, other); !slices.Equal(before, after) {
		t.Errorf("install made %v in a directory of other things", diffPaths(before, after))
	}

	// The advice, ID and FILE filled in: the first registration makes the
	// store, and the install is refused no more for its interfaces.
	for _, id := range []string{"acme.echo", "acme.diagnostics"} {
		if r := cruxprov(t, "--home", home, "interface", "register", id, "--schema", fx.Interfaces[id].Path); r.code != 0 {
			t.Fatalf("the advice, %s: %+v", id, r)
		}
	}
	if r := cruxprov(t, append([]string{"--home", home}, install...)...); strings.Contains(r.stderr, string(refusal.InterfaceUnregistered)) {
		t.Errorf("install after the advised registrations: %+v", r)
	}
}

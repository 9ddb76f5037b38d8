package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestRegistryPinPutBack, as an unprivileged operator: revision 2
// accepted, the revision-1 pin file put back. provider retire and the
// same proposal again are refused pin_rollback, naming the pin the
// history holds and advising `registry repair`, which writes it again;
// the retire then continues from revision 2 (revision 3). Before, the
// retire was proposed on revision 1 and its approval accepted a second
// pin at revision 2, which `registry log --verify` passed.
func TestRegistryPinPutBack(t *testing.T) {
	home, keys, as := nobodyOperator(t, "cruxprov-putback-")
	key := filepath.Join(keys, "alice")
	for _, a := range [][]string{{"key", "generate", "--out", key}, {"key", "trust", key + ".pub", "--name", "alice"}} {
		if r := as(a...); r.code != 0 {
			t.Fatalf("%v: %+v", a, r)
		}
	}
	ctx := context.Background()
	pinPath := filepath.Join(home, "registry", "pins", "acme-echo.json")
	var old []byte
	for _, v := range []string{"1.0", "2.0"} {
		d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
		if err != nil {
			t.Fatal(err)
		}
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", v), "t")
		if err != nil {
			t.Fatal(err)
		}
		chownTree(t, home)
		if r := as("changeset", "approve", cs.Metadata.ID.String(), "--key", key+".key"); r.code != 0 {
			t.Fatalf("approve %s: %+v", v, r)
		}
		if v == "1.0" {
			var err error
			if old, err = os.ReadFile(pinPath); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(pinPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r := as("provider", "retire", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_rollback: ") || !strings.Contains(r.stderr, "revision 2") ||
		!strings.Contains(r.stderr, "to fix: cruxprov registry repair --home ") {
		t.Fatalf("retire on the put-back pin: %+v", r)
	}
	if r := as("registry", "repair"); r.code != 0 || !strings.Contains(r.stdout, "pin of acme-echo written again") {
		t.Fatalf("registry repair: %+v", r)
	}
	if r := as("registry", "repair"); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("registry repair again: %+v", r)
	}
	// The pin file lost: verify (what an executor runs) refuses it as
	// damage with the same advice as a mutation, not as pin_unapproved
	// ("a proposal takes effect once approved"), and provider show too.
	if err := os.Remove(pinPath); err != nil {
		t.Fatal(err)
	}
	for _, a := range [][]string{{"verify", "acme-echo"}, {"provider", "show", "acme-echo"}, {"provider", "list"}, {"registry", "log", "--verify"}, {"provider", "retire", "acme-echo"}} {
		if r := as(a...); r.code != exitRefused || !strings.Contains(r.stderr, "refused: registry_corrupt: ") || !strings.Contains(r.stderr, "the pin file was lost") ||
			!strings.Contains(r.stderr, "to fix: cruxprov registry repair --home ") {
			t.Errorf("%v on a lost pin file: %+v", a, r)
		}
	}
	if r := as("registry", "repair"); r.code != 0 || !strings.Contains(r.stdout, "pin of acme-echo written again") {
		t.Fatalf("registry repair of the lost pin: %+v", r)
	}
	r = as("provider", "retire", "acme-echo", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"revision": 3`) {
		t.Fatalf("retire after the repair: %+v", r)
	}
	if r := as("registry", "log", "--verify"); r.code != 0 {
		t.Fatalf("registry log --verify: %+v", r)
	}
}

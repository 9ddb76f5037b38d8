package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterfaceListWithNoStoreSaysHowToMakeOne: a provider's author reads
// an interface's digest in a store of their own (provider-authors.md §3);
// `interface list` where there is none said only that --home "must name
// the operator's store". It now also says that `interface register` makes
// one, and the advice, followed, gives the digest the operator's store
// gives for that schema.
func TestInterfaceListWithNoStoreSaysHowToMakeOne(t *testing.T) {
	base := t.TempDir()
	mine := filepath.Join(base, "mine")
	schema := filepath.Join(base, "echo.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","title":"echo"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "interface", "list", "--home", mine)
	advice := "cruxprov interface register ID --schema FILE --home " + mine + " (it makes the store)"
	if r.code != exitFailure || !strings.Contains(r.stderr, "there is no store at "+mine) || !strings.Contains(r.stderr, advice) {
		t.Fatalf("interface list with no store: %+v", r)
	}
	if _, err := os.Lstat(mine); err == nil {
		t.Fatalf("interface list made %s", mine)
	}
	// The advice, ID and FILE filled in.
	if r := cruxprov(t, "interface", "register", "acme.echo/v1", "--schema", schema, "--home", mine); r.code != 0 {
		t.Fatalf("the advice: %+v", r)
	}
	r = cruxprov(t, "interface", "list", "--home", mine)
	theirs := filepath.Join(base, "operator")
	o := cruxprov(t, "interface", "register", "acme.echo/v1", "--schema", schema, "--home", theirs)
	if r.code != 0 || o.code != 0 {
		t.Fatalf("list %+v, the operator's register %+v", r, o)
	}
	digest := strings.Fields(o.stdout)[1]
	if !strings.Contains(r.stdout, "acme.echo/v1") || !strings.Contains(r.stdout, digest) {
		t.Fatalf("the author's store lists %q, the operator's store registered %q", r.stdout, o.stdout)
	}
}

package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
)

// TestInterfacesCheckedAgainstHistory: interfaces.json with one hex digit
// of a digest changed is registry_corrupt, naming the interface, to
// VerifyHistory, to Interfaces (install's interface check) and to
// registering it again — not interface_digest_mismatch blaming the
// schema; Repair writes interfaces.json again from the history.
func TestInterfacesCheckedAgainstHistory(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	schema := []byte(`{"type":"object"}`)
	it, err := d.RegisterInterface(ctx, "acme.echo/v1", schema)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Root(), "interfaces.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	hex := it.Digest.Hex()
	flip := "0"
	if hex[0] == '0' {
		flip = "1"
	}
	b = []byte(strings.Replace(string(b), hex, flip+hex[1:], 1))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"VerifyHistory": registry.VerifyHistory(ctx, d),
		"Interfaces":    func() error { _, err := d.Interfaces(ctx); return err }(),
		"register":      func() error { _, err := d.RegisterInterface(ctx, "acme.echo/v1", schema); return err }(),
	} {
		wantRefusal(t, err, refusal.RegistryCorrupt)
		if !strings.Contains(err.Error(), "acme.echo/v1") {
			t.Errorf("%s: %v does not name the interface", name, err)
		}
	}
	r, err := d.Repair(ctx)
	if err != nil || !r.Interfaces {
		t.Fatalf("repair: %+v, %v", r, err)
	}
	l, err := d.Interfaces(ctx)
	if err != nil || len(l) != 1 || l[0].Digest != it.Digest {
		t.Fatalf("after repair: %+v, %v", l, err)
	}
	if err := registry.VerifyHistory(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaCap: a schema larger than MaxSchemaBytes (1 MiB) is
// interface_invalid and nothing is recorded; one of exactly the cap is
// registered. It was held only to the CLI's 64 MiB of every input file,
// and a 30 MB schema took about 500 MB of memory to canonicalize.
func TestSchemaCap(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(n int) []byte {
		head, tail := `{"description":"`, `"}`
		return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
	}
	_, err = d.RegisterInterface(ctx, "acme.big/v1", doc(registry.MaxSchemaBytes+1))
	wantRefusal(t, err, refusal.InterfaceInvalid)
	if !strings.Contains(err.Error(), "at most 1048576 (1 MiB)") {
		t.Errorf("the refusal does not say the cap: %v", err)
	}
	if l, err := d.Log(ctx); err != nil || len(l) != 0 {
		t.Errorf("a refused schema recorded: %+v, %v", l, err)
	}
	if _, err := d.RegisterInterface(ctx, "acme.big/v1", doc(registry.MaxSchemaBytes)); err != nil {
		t.Errorf("a schema of exactly the cap: %v", err)
	}
}

// TestInterfaceRegisteredAtEdited: interfaces.json's registeredAt, which
// no signature covers and `interface list` shows, is held to the time
// of the history's entry: an edited one is registry_corrupt advising
// repair, which writes it again. Before, it was shown as edited.
func TestInterfaceRegisteredAtEdited(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	it, err := d.RegisterInterface(ctx, "acme.echo/v1", []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Root(), "interfaces.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := it.RegisteredAt.MarshalJSON()
	edited := strings.Replace(string(b), string(at), `"2020-01-01T00:00:00Z"`, 1)
	if edited == string(b) {
		t.Fatalf("registeredAt %s not in %s", at, b)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.Interfaces(ctx)
	wantRefusal(t, err, refusal.RegistryCorrupt)
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionRepairRegistry {
		t.Errorf("remedy %+v, want repair_registry", rem)
	}
	if r, err := d.Repair(ctx); err != nil || !r.Interfaces {
		t.Fatalf("repair: %+v, %v", r, err)
	}
	if l, err := d.Interfaces(ctx); err != nil || len(l) != 1 || !l[0].RegisteredAt.Equal(it.RegisteredAt) {
		t.Errorf("after repair: %+v, %v", l, err)
	}
}

// TestInterfaceSchemaChangedSaysWhatToDo: walking operator.md §6,
// `interface register acme.echo --schema` with another schema than the
// one registered was refused "interface acme.echo is registered with
// sha256:…; this schema is sha256:…" and no more: the refusal now says
// that an id keeps its schema and what to do (a new id, or the
// registered schema), as refusals.md advises.
func TestInterfaceSchemaChangedSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RegisterInterface(ctx, "acme.echo", []byte(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = d.RegisterInterface(ctx, "acme.echo", []byte(`{"type":"array"}`))
	wantRefusal(t, err, refusal.InterfaceDigestMismatch)
	for _, want := range []string{"interface acme.echo is registered with sha256:", "keeps its schema for good", "register this schema under a new interface id", "or give the schema registered as acme.echo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

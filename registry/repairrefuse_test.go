package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestRepairRefusesWhatItCannotRepair: Repair of a registry whose pin
// file the history never accepted (the history's last entries cut off,
// or the pin's revision edited up: each said) or whose trust.json is lost
// is registry_corrupt, writing nothing.
// Before, it said there was nothing to repair ("the pin files and
// interfaces.json are what the history says") while verify refused the
// registry.
func TestRepairRefusesWhatItCannotRepair(t *testing.T) {
	ctx := context.Background()

	d := acceptedRegistry(t, t.TempDir())
	logPath := filepath.Join(d.Root(), "log.jsonl")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	cut := bytes.Join(lines[:len(lines)-2], nil) // the pin-accepted entry off
	if err := os.WriteFile(logPath, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := d.Repair(ctx)
	if refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), "(the history's last entries cut off)") {
		t.Errorf("history's tail cut: Repair = %+v, %v; want registry_corrupt saying so", r, err)
	}

	// The pin's revision edited up: said to be the file edited (it was
	// said to be the history cut).
	d = acceptedRegistry(t, t.TempDir())
	pin := filepath.Join(d.Root(), "pins", "acme-echo.json")
	b, err = os.ReadFile(pin)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["revision"] = 7
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pin, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Repair(ctx); refusal.CodeOf(err) != refusal.RegistryCorrupt || !strings.Contains(err.Error(), "(the file edited: it says revision 7, its signed spec revision 1)") {
		t.Errorf("pin revision edited: Repair = %+v, %v; want registry_corrupt saying the file was edited", r, err)
	}

	d = acceptedRegistry(t, t.TempDir())
	if err := os.Remove(filepath.Join(d.Root(), "trust.json")); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Repair(ctx); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("trust.json lost: Repair = %+v, %v; want registry_corrupt", r, err)
	}
}

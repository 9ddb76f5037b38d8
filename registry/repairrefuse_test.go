package registry_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestRepairRefusesWhatItCannotRepair: Repair of a registry whose pin
// file the history never accepted (the history's last entries cut off)
// or whose trust.json is lost is registry_corrupt, writing nothing.
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
	if refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("history's tail cut: Repair = %+v, %v; want registry_corrupt", r, err)
	}

	d = acceptedRegistry(t, t.TempDir())
	if err := os.Remove(filepath.Join(d.Root(), "trust.json")); err != nil {
		t.Fatal(err)
	}
	if r, err := d.Repair(ctx); refusal.CodeOf(err) != refusal.RegistryCorrupt {
		t.Errorf("trust.json lost: Repair = %+v, %v; want registry_corrupt", r, err)
	}
}

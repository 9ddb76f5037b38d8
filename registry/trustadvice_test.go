package registry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// TestTrustEditedSaysWhatToDo: walking governance.md as cruxprov-rootless,
// trust.json edited by hand (the threshold lowered, a builder made an
// approver) was refused by key list, policy show, verify and registry
// log --verify with "the trust state's keys or policy are not what its
// approved steps make" and no more: not what differs, nor what to do,
// though a mutation on it said to restore trust.json from a copy taken
// after the history's last governance entry. The readers now say both,
// and restoring it as said makes them pass again.
func TestTrustEditedSaysWhatToDo(t *testing.T) {
	ctx := context.Background()
	d, _, k, approve := govDir(t, 2, "alice", "bob")
	approve(registrytest.Change("acme-echo", "1.0"), nil, k["alice"], k["bob"])
	state := t.TempDir()
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
	log, err := d.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for _, e := range log {
		if e.Event == registry.EventKeyTrusted || e.Event == registry.EventKeyUntrusted || e.Event == registry.EventPolicyChanged {
			last = e.Seq
		}
	}
	p := filepath.Join(d.Root(), "trust.json")
	copyOf, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var tr map[string]any
	if err := json.Unmarshal(copyOf, &tr); err != nil {
		t.Fatal(err)
	}
	tr["policy"] = map[string]any{"threshold": 1}
	edited, _ := json.Marshal(tr)
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	restore := "restore trust.json from a copy of the registry taken after entry " + itoa(last)
	check := func(what string, err error) {
		t.Helper()
		wantRefusal(t, err, refusal.RegistryCorrupt)
		for _, want := range []string{"its threshold is 1; they make 2", restore} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", what, err, want)
			}
		}
	}
	_, err = registry.CheckedTrust(ctx, d)
	check("CheckedTrust (key list, policy show)", err)
	check("VerifyTrust (registry log --verify)", registry.VerifyTrust(ctx, d))
	_, err = registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now())
	check("VerifyPin", err)
	// Follow the advice: the copy taken after that entry.
	if err := os.WriteFile(p, copyOf, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.CheckedTrust(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

package verify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/verify"
)

// TestRefusedCheckMakesNoState: a verification CheckPin refuses after the
// pin's own checks passed (an entrypoint the pin does not have, a
// protocol this cruxprov does not speak) leaves a state directory not
// made yet unmade. Before, the floor was raised as soon as the pin
// verified, so `verify NAME --entrypoint E` refused entrypoint_unknown
// under a new --state-dir DIR had made DIR/floors and the floor in it.
// Once the checks pass, the floor is there.
func TestRefusedCheckMakesNoState(t *testing.T) {
	ctx := context.Background()
	d, err := registry.OpenDir(ctx, filepath.Join(t.TempDir(), "registry"))
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	registrytest.Accept(t, d, registrytest.Change("acme-echo", "1.0"), root)
	future := registrytest.Change("acme-future", "1.0")
	future.Provider.Protocol = []int{99, 99}
	registrytest.Accept(t, d, future, root)
	base := t.TempDir()
	for _, tc := range []struct {
		name, provider, entrypoint string
		code                       refusal.Code
	}{
		{"entrypoint unknown", "acme-echo", "nope", refusal.EntrypointUnknown},
		{"protocol unsupported", "acme-future", "", refusal.ProtocolUnsupported},
		{"no pin", "acme-nope", "echo", refusal.PinUnapproved},
	} {
		state := filepath.Join(base, "state-"+tc.provider)
		_, err := verify.CheckPin(ctx, d, tc.provider, verify.Options{StateDir: state, Entrypoint: tc.entrypoint})
		if !errors.Is(err, tc.code) {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.code)
		}
		if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: refused, and the state directory %s is there (%v)", tc.name, state, err)
		}
	}
	state := filepath.Join(base, "state-ok")
	acc, err := verify.CheckPin(ctx, d, "acme-echo", verify.Options{StateDir: state, Entrypoint: "echo"})
	if err != nil || acc.Entrypoint == nil || acc.Entrypoint.Name != "echo" {
		t.Fatalf("CheckPin acme-echo echo: %+v, %v", acc, err)
	}
	if fs, err := filepath.Glob(filepath.Join(state, "floors", "*.json")); err != nil || len(fs) != 1 {
		t.Errorf("a pin checked: floors %v (%v), want one", fs, err)
	}
}

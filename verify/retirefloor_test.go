package verify_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/verify"
)

// TestRetirementRaisesTheFloor: a verifier that saw a provider retired
// keeps the retirement. Its verify is refused (the provider is retired),
// and the floor still moves to the retirement's revision, so a registry
// put back to a copy from before the retirement (an old backup, an
// attacker's replay) is refused pin_rollback rather than running the
// retired provider again: rollback protection is for the newest state a
// verifier saw, as TUF's client keeps the newest metadata it verified
// whatever it then looked up. Before, VerifyPin refused a retired pin
// before checking it and raised no floor, so this replay ran the retired
// provider again.
func TestRetirementRaisesTheFloor(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "registry")
	d, err := registry.OpenDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	root := registrytest.NewKey(t, "root", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, root.Key, "t"); err != nil {
		t.Fatal(err)
	}
	registrytest.Accept(t, d, registrytest.Change("acme-echo", "1.0"), root)
	backup := filepath.Join(base, "backup")
	if out, err := exec.Command("cp", "-a", dir, backup).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	state := filepath.Join(base, "state")
	if _, err := verify.CheckPin(ctx, d, "acme-echo", verify.Options{StateDir: state, Entrypoint: "echo"}); err != nil {
		t.Fatalf("before the retirement: %v", err)
	}
	registrytest.Accept(t, d, registry.Change{Action: registry.ActionRetire, Provider: &registry.Provider{Name: "acme-echo"}}, root)
	if _, err := verify.CheckPin(ctx, d, "acme-echo", verify.Options{StateDir: state, Entrypoint: "echo"}); refusal.CodeOf(err) != refusal.PinUnapproved {
		t.Fatalf("retired: %v, want pin_unapproved", err)
	}
	// The registry put back to the copy from before the retirement.
	if out, err := exec.Command("sh", "-c", `chmod -R u+w "$1" && rm -rf "$1" && cp -a "$2" "$1"`, "sh", dir, backup).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v: %s", err, out)
	}
	old, err := registry.OpenDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = verify.CheckPin(ctx, old, "acme-echo", verify.Options{StateDir: state, Entrypoint: "echo"})
	if c := refusal.CodeOf(err); c != refusal.PinRollback && c != refusal.RegistryCorrupt {
		t.Fatalf("the registry from before the retirement: %v, want pin_rollback (or registry_corrupt): the verifier saw the retirement", err)
	}
}

package container_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/pinned/container"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
)

// TestRunCtxEndedInItsPinCheck: as pinned.Run, a container run whose
// context ends while its pin is checked returns ctx's error, not a
// *pinned.VerifyError (a refusal at the pin, with none inside).
func TestRunCtxEndedInItsPinCheck(t *testing.T) {
	dir := t.TempDir()
	reg, err := registry.OpenDirReadOnly(context.Background(), filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := container.Run(ctx, reg, pinned.Request{Provider: "acme-echo", Entrypoint: "echo",
		Verify: verify.Options{StateDir: filepath.Join(dir, "state")}}, container.Options{})
	var ve *pinned.VerifyError
	if res != nil || !errors.Is(err, context.Canceled) || errors.As(err, &ve) {
		t.Errorf("a run whose context ended: %+v, %#v; want context.Canceled, not a *pinned.VerifyError", res, err)
	}
}

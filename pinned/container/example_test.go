package container_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"path/filepath"

	"github.com/cruxible/cruxprov/pinned"
	pcontainer "github.com/cruxible/cruxprov/pinned/container"
	"github.com/cruxible/cruxprov/podman"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/verify"
	"github.com/cruxible/cruxprov/verify/container"
)

// An executor that verifies a container pin itself builds the call with
// Call, as Run does (docs/executor.md, "Container runs"): the image by
// digest, the manifest's budgets and egress and the runtime the image's
// provenance names included.
func ExampleCall() {
	ctx := context.Background()
	home, state := "/home/op/.local/share/cruxprov", "/var/lib/executor/cruxprov"
	reg, err := registry.OpenDirReadOnly(ctx, filepath.Join(home, "registry"))
	if err != nil {
		log.Fatal(err)
	}
	led, err := receipts.Open(ctx, filepath.Join(state, "receipts", "exec.jsonl"), receipts.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer led.Close()
	input := json.RawMessage(`{"hello": "world"}`)
	resolve := func(_ context.Context, ref string) (string, error) { return "", os.ErrNotExist }

	vo := verify.Options{Entrypoint: "echo", StateDir: state}
	rep, verr := container.Verify(ctx, reg, "acme-echo", vo, container.Options{}) // package verify/container
	// pinned/container's Call; nil: refused before the pin named the image.
	call := pcontainer.Call(rep, pinned.Request{
		Provider: "acme-echo", Entrypoint: "echo", Input: input, Resolve: resolve,
		Environ: os.Environ(), Allow: []string{"LANG"},
	})
	if call == nil {
		log.Fatal(verr)
	}
	call.Verify = func(context.Context) error { return verr } // a refusal is recorded in the ledger
	ex := &podman.Executor{Ledger: led}
	res, err := ex.Run(ctx, call)
	log.Print(res, err)
}

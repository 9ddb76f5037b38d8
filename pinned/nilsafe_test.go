package pinned_test

import (
	"context"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/verify"
)

// noPanic runs f and fails t, naming what, when it panics: an executor
// that embeds these packages stays up, and a panic ends it.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// TestNilInputsNoPanic: the zero and nil values an embedder may hold
// (a report that failed before its seal, a nil spec, a zero error, a
// nil registry) are answered as the godoc says; each panicked.
func TestNilInputsNoPanic(t *testing.T) {
	for name, rep := range map[string]*verify.Report{
		"nil report":       nil,
		"report, no seal":  {Provider: "p"},
		"seal report, nil": {Seal: &seal.Report{}},
	} {
		noPanic(t, "Bwrap of a "+name, func() {
			if b, err := pinned.Bwrap(rep); len(b.ReadOnly) != 0 || b.Path != "" || refusal.CodeOf(err) != refusal.SealMissing {
				t.Errorf("Bwrap of a %s: %+v, %v; want the zero preset, refused seal_missing", name, b, err)
			}
		})
	}
	noPanic(t, "CallOn of a nil spec", func() {
		if c := pinned.CallOn(nil, nil, registry.Materialization{}, pinned.Request{Entrypoint: "e"}); c != nil {
			t.Errorf("CallOn of a nil spec: %+v, want nil", c)
		}
	})
	noPanic(t, "CallOn of a nil spec with an entrypoint", func() {
		e := &registry.Entrypoint{Name: "e"}
		if c := pinned.CallOn(nil, e, registry.Materialization{}, pinned.Request{Entrypoint: "e"}); c != nil {
			t.Errorf("CallOn of a nil spec: %+v, want nil", c)
		}
	})
	noPanic(t, "Error of a zero VerifyError", func() {
		if s := (&pinned.VerifyError{}).Error(); s == "" {
			t.Error("a zero VerifyError's Error is empty")
		}
	})
	noPanic(t, "Error of a nil VerifyError", func() {
		if s := (*pinned.VerifyError)(nil).Error(); s == "" {
			t.Error("a nil VerifyError's Error is empty")
		}
	})
	noPanic(t, "Run with a nil registry", func() {
		res, err := pinned.Run(context.Background(), nil, pinned.Request{Provider: "p", Entrypoint: "e"}, pinned.Local{Executor: invoke.Subprocess{}})
		if res != nil || refusal.CodeOf(err) != refusal.RegistryCorrupt {
			t.Errorf("Run with a nil registry: %+v, %v; want registry_corrupt", res, err)
		}
	})
	noPanic(t, "Run with a nil *registry.Dir", func() {
		res, err := pinned.Run(context.Background(), (*registry.Dir)(nil), pinned.Request{Provider: "p", Entrypoint: "e"}, pinned.Local{})
		if res != nil || refusal.CodeOf(err) != refusal.RegistryCorrupt {
			t.Errorf("Run with a nil *registry.Dir: %+v, %v; want registry_corrupt", res, err)
		}
	})
}

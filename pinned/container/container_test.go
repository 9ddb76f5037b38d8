package container_test

import (
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/pinned/container"
	"github.com/cruxible/cruxprov/registry"
	vcontainer "github.com/cruxible/cruxprov/verify/container"
)

// TestCall: the call of a verified container pin names the image by
// digest and carries the pin's digests, the manifest's budgets and the
// caller's request; a report that names no image makes none.
func TestCall(t *testing.T) {
	req := pinned.Request{Provider: "acme-echo", Entrypoint: "echo", Input: []byte(`{}`), IdempotencyKey: "k", Allow: []string{"LANG"}}
	if container.Call(nil, req) != nil || container.Call(&vcontainer.Report{Provider: "acme-echo"}, req) != nil {
		t.Fatal("Call of a report that names no image: want nil")
	}
	img := "registry.example/acme@" + digest.Sum([]byte("m")).String()
	rep := &vcontainer.Report{
		Provider:        "acme-echo",
		Spec:            &registry.Provider{Name: "acme-echo", Secrets: []string{"acme/api-token"}, Budgets: map[string]int64{"timeout_ms": 3000}},
		Entrypoint:      &registry.Entrypoint{Name: "echo", Object: "acme_echo:Echo", ImplementationDigest: digest.Sum([]byte("impl"))},
		Materialization: registry.Materialization{Backend: registry.BackendContainer, Platform: "linux_x86_64-cp311", Digest: digest.Sum([]byte("mat")), Image: img},
	}
	c := container.Call(rep, req)
	if c == nil || c.Image != img || c.Env != "" || c.Object != "acme_echo:Echo" || c.MaterializationDigest != rep.Materialization.Digest ||
		c.Budgets.TimeoutMS != 3000 || len(c.Secrets) != 1 || c.IdempotencyKey != "k" || c.Verify != nil || c.Runtime != rep.Runtime() {
		t.Fatalf("Call: %+v", c)
	}
	// req's entrypoint, as the pin has it, whichever one rep was verified
	// with (it took rep's object and digest under req's name), or none;
	// nil for one the pin has not.
	sleep := registry.Entrypoint{Name: "sleep", Object: "acme_echo.diagnostics:sleep", ImplementationDigest: digest.Sum([]byte("sleep"))}
	rep.Spec.Entrypoints = []registry.Entrypoint{*rep.Entrypoint, sleep}
	req.Entrypoint = "sleep"
	for _, e := range []*registry.Entrypoint{rep.Entrypoint, nil} {
		r := *rep
		r.Entrypoint = e
		if c := container.Call(&r, req); c == nil || c.Entrypoint != "sleep" || c.Object != sleep.Object || c.ImplementationDigest != sleep.ImplementationDigest {
			t.Errorf("the call of sleep on a report verified for %v: %+v", e, c)
		}
	}
	req.Entrypoint = "nonesuch"
	if c := container.Call(rep, req); c != nil {
		t.Errorf("the call of an entrypoint the pin has not: %+v, want nil", c)
	}
}

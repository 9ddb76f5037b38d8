package podman

import (
	"context"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/refusal"
)

// TestForwardNotWhatPodmanReads: a container run refuses to forward a
// variable podman reads itself, allowed or injected, before podman is
// asked anything. Forwarded, its value went into `podman run`'s own
// environment: with HOME (or XDG_DATA_HOME) other than the pull's, podman
// looked for the image in other storage and the run failed "image not
// known"; with NOTIFY_SOCKET podman sent the executor's systemd service
// MAINPID= (conmon's pid) and bound a notify socket into the container.
func TestForwardNotWhatPodmanReads(t *testing.T) {
	call := func(allow, inject []string) *invoke.Call {
		return &invoke.Call{Provider: "p", Entrypoint: "e", Object: "m:f", Platform: "host", Input: []byte(`{}`),
			ImplementationDigest: digest.Sum([]byte("i")), MaterializationDigest: digest.Sum([]byte("m")),
			Image:   "oci:/nonexistent@" + digest.Sum([]byte("m")).String(),
			Environ: []string{"HOME=/elsewhere", "LANG=C.UTF-8"}, Allow: allow, Inject: inject}
	}
	for _, tc := range []struct {
		allow, inject []string
		name          string
		remedy        bool // the allowed name is not allowed again (an injected one is the caller's code)
	}{
		{[]string{"LANG", "HOME"}, nil, "HOME", true},
		{[]string{"XDG_DATA_HOME"}, nil, "XDG_DATA_HOME", true},
		{[]string{"NOTIFY_SOCKET"}, nil, "NOTIFY_SOCKET", true},
		{[]string{"CONTAINERS_CONF"}, nil, "CONTAINERS_CONF", true},
		{nil, []string{"LD_PRELOAD=/x.so"}, "LD_PRELOAD", false},
		// Injected as well as allowed: not allowing it would not do.
		{[]string{"LD_PRELOAD"}, []string{"LD_PRELOAD=/x.so"}, "LD_PRELOAD", false},
		// One injected beside one allowed: the injected one first.
		{[]string{"HOME"}, []string{"LD_PRELOAD=/x.so"}, "LD_PRELOAD", false},
	} {
		_, err := (&Executor{Podman: "/nonexistent/podman"}).Run(context.Background(), call(tc.allow, tc.inject))
		if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "cannot pass "+tc.name+" to the provider") {
			t.Errorf("allow %q, inject %q: %v; want container_unavailable naming %s", tc.allow, tc.inject, err, tc.name)
		}
		r := refusal.RemedyOf(err)
		if tc.remedy && (r == nil || r.Action != refusal.ActionDisallowEnv || r.Target != tc.name) || !tc.remedy && r != nil {
			t.Errorf("allow %q, inject %q: remedy %+v, want %s of %s: %t", tc.allow, tc.inject, r, refusal.ActionDisallowEnv, tc.name, tc.remedy)
		}
	}
	// Other names pass this check (podman missing is what refuses then).
	_, err := (&Executor{Podman: "/nonexistent/podman"}).Run(context.Background(), call([]string{"LANG", "HOMEPAGE", "CRUXPROV_X"}, []string{"ACME_MODE=1"}))
	if err == nil || strings.Contains(err.Error(), "cannot pass") {
		t.Errorf("LANG, HOMEPAGE, CRUXPROV_X, ACME_MODE: %v", err)
	}
}

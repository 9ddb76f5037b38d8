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
	}{
		{[]string{"LANG", "HOME"}, nil, "HOME"},
		{[]string{"XDG_DATA_HOME"}, nil, "XDG_DATA_HOME"},
		{[]string{"NOTIFY_SOCKET"}, nil, "NOTIFY_SOCKET"},
		{[]string{"CONTAINERS_CONF"}, nil, "CONTAINERS_CONF"},
		{nil, []string{"LD_PRELOAD=/x.so"}, "LD_PRELOAD"},
	} {
		_, err := (&Executor{Podman: "/nonexistent/podman"}).Run(context.Background(), call(tc.allow, tc.inject))
		if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "cannot pass "+tc.name+" to the provider") {
			t.Errorf("allow %q, inject %q: %v; want container_unavailable naming %s", tc.allow, tc.inject, err, tc.name)
		}
	}
	// Other names pass this check (podman missing is what refuses then).
	_, err := (&Executor{Podman: "/nonexistent/podman"}).Run(context.Background(), call([]string{"LANG", "HOMEPAGE", "CRUXPROV_X"}, []string{"ACME_MODE=1"}))
	if err == nil || strings.Contains(err.Error(), "cannot pass") {
		t.Errorf("LANG, HOMEPAGE, CRUXPROV_X, ACME_MODE: %v", err)
	}
}

package podman

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestPodmanMissingSaysWhatToDo: a container run on a host without podman
// was refused "container_unavailable: cannot run podman (podman): exec:
// "podman": executable file not found in $PATH", which says nothing of
// what to do (DESIGN §2). It says to install podman and runc. (No podman
// is started: the binary named is not there.)
func TestPodmanMissingSaysWhatToDo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "podman")
	_, err := (&Executor{Podman: missing}).podmanOut(context.Background(), "info")
	if refusal.CodeOf(err) != refusal.ContainerUnavailable ||
		!strings.Contains(err.Error(), "podman is not installed here ("+missing+" not found): install podman and runc (Debian: apt-get install podman runc)") {
		t.Errorf("%v, want container_unavailable saying to install podman", err)
	}
}

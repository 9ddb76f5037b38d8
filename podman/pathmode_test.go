package podman

import (
	"os"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/refusal"
)

// TestPathModeNeedsRootSaysSo: path mode run by a user who is not root
// is refused container_unavailable saying that path mode needs root and
// the pipe mode does not. Rootless, the directory for the tmpfs under
// /run was refused first, and the refusal read "no directory for a
// private tmpfs: mkdir /run/cruxprov-secret-…: permission denied" and
// nothing of what to do (seen as cruxprov-rootless with run --backend
// container --secret-delivery path). As root, run as uid 65534.
func TestPathModeNeedsRootSaysSo(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "be a user who is not root")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-pathmode-"), "TestPathModeNeedsRootSaysSo")
		return
	}
	dir, _, err := privateTmpfs("", "65534", "65534", []byte("{}"))
	if err == nil {
		t.Fatalf("a private tmpfs mounted at %s by uid %d", dir, os.Geteuid())
	}
	if refusal.CodeOf(err) != refusal.ContainerUnavailable || !strings.Contains(err.Error(), "needs root; the pipe mode does not") {
		t.Errorf("got %v, want container_unavailable saying path mode needs root", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionSecretPipe {
		t.Errorf("the refusal carries remedy %+v, want %s (the run again by pipe)", rem, refusal.ActionSecretPipe)
	}
}

package podman

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestPrunePullStaging: an executor killed while podman pulled from a
// layout leaves its private one-entry layout (cruxprov-pull-*: index.json,
// oci-layout, a link to the layout's blobs) in the temp directory, where
// nothing removed it. Prune removes those older than a pull may last; a
// fresh one (a pull now) and anything else stay, and the blobs a link
// names are not followed. The private directories of runs (runDirPrefix,
// podman's working directory) such executors left go the same way, but
// not one a run holds locked: a run goes on as long as its budget, and
// the subprocess executor's working directories share the name (Prune
// removed a local run's directory under it once 21 minutes old).
func TestPrunePullStaging(t *testing.T) {
	dir := t.TempDir()
	blobs := filepath.Join(t.TempDir(), "blobs")
	os.MkdirAll(blobs, 0o755)
	os.WriteFile(filepath.Join(blobs, "keep"), []byte("x"), 0o644)
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "index.json"), []byte("{}"), 0o644)
		os.Symlink(blobs, filepath.Join(p, "blobs"))
		old := time.Now().Add(-age)
		os.Chtimes(p, old, old)
		return p
	}
	stale := mk("cruxprov-pull-1", pullTimeout+2*time.Minute)
	fresh := mk("cruxprov-pull-2", time.Minute)
	other := mk("other-pull-3", pullTimeout+2*time.Minute)
	staleRun := mk(runDirPrefix+"4", pullTimeout+2*time.Minute)
	freshRun := mk(runDirPrefix+"5", time.Minute)
	// A run still going, this executor's or a local run's working
	// directory (the same name): it holds its directory locked.
	heldRun := mk(runDirPrefix+"6", pullTimeout+2*time.Minute)
	h, err := os.Open(heldRun)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := syscall.Flock(int(h.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// A pull stages where podman can name its layout (stagingDirs), not
	// always in the temp directory: those are pruned too.
	pulls := t.TempDir()
	staleElsewhere := filepath.Join(pulls, "cruxprov-pull-7")
	os.Mkdir(staleElsewhere, 0o700)
	old := time.Now().Add(-pullTimeout - 2*time.Minute)
	os.Chtimes(staleElsewhere, old, old)
	gone := pruneStaging(dir, dir, pulls)
	if want := []string{stale, staleElsewhere, staleRun}; !slices.Equal(gone, want) {
		t.Fatalf("pruned %v, want %v", gone, want)
	}
	for _, p := range []string{fresh, other, freshRun, heldRun, filepath.Join(blobs, "keep")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

package podman

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPrunePullStaging: an executor killed while podman pulled from a
// layout leaves its private one-entry layout (cruxprov-pull-*: index.json,
// oci-layout, a link to the layout's blobs) in the temp directory, where
// nothing removed it. Prune removes those older than a pull may last; a
// fresh one (a pull now) and anything else stay, and the blobs a link
// names are not followed. The private directories of runs (runDirPrefix,
// podman's working directory) such executors left go the same way.
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
	gone := pruneStaging(dir)
	if !slices.Equal(gone, []string{stale, staleRun}) {
		t.Fatalf("pruned %v, want %v", gone, []string{stale, staleRun})
	}
	for _, p := range []string{fresh, other, freshRun, filepath.Join(blobs, "keep")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

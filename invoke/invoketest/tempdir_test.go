package invoketest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/invoke/invoketest"
)

// TestTempDirRemovable: the directory an executor's tests give BuildLocal
// is removed at the test's end though what it holds is read-only, as the
// sealed env and the store's blobs are. docs/executor.md's registration of
// the battery, walked from a module of its own by a user who is not root
// with t.TempDir(), passed the battery and failed the test at cleanup
// ("TempDir RemoveAll cleanup: unlinkat …/store/envs/…/pyvenv.cfg:
// permission denied"). Root ignores the modes: the check bites for any
// other user.
func TestTempDirRemovable(t *testing.T) {
	var dir string
	t.Run("sealed", func(t *testing.T) {
		dir = invoketest.TempDir(t)
		env := filepath.Join(dir, "store", "envs", "e")
		if err := os.MkdirAll(filepath.Join(env, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(env, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Join(env, "bin"), env} {
			if err := os.Chmod(d, 0o555); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after the test's cleanup: %v, want it removed", dir, err)
	}
}

package deniedat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestPath: a directory this user may not enter above the file is what
// denied it; else the file. Root enters whatever the modes: skipped as
// root (registry's TestOpenDirUnwritable and cmd's
// TestRegistryUnreadableAdvisesChmod run it as another user).
func TestPath(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root enters a directory of mode 0: run as another user")
	}
	base := t.TempDir()
	t.Cleanup(func() { testdir.Writable(base) })
	f := filepath.Join(base, "a", "b", "f")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, nil, 0)
	if got := Path(f); got != f {
		t.Errorf("Path(%s) = %s, want the file", f, got)
	}
	os.Chmod(filepath.Join(base, "a"), 0)
	if got, want := Path(f), filepath.Join(base, "a"); got != want {
		t.Errorf("Path(%s) = %s, want %s", f, got, want)
	}
}

// TestNotDir: the first path from the root down that is there and is no
// directory, the cause of ENOTDIR; "" where every part is a directory or
// is not there.
func TestNotDir(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		filepath.Join(f, "a", "b"):         f,
		f:                                  f,
		filepath.Join(dir, "missing", "x"): "",
		dir:                                "",
		"/":                                "",
	} {
		if got := NotDir(p); got != want {
			t.Errorf("NotDir(%s) = %q, want %q", p, got, want)
		}
	}
}

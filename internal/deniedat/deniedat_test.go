package deniedat

import (
	"errors"
	"fmt"
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

// TestFind: the denying path with its owner, as a message names them;
// the path asked for where none above it denies; and FindErr only of an
// error that names a path.
func TestFind(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := Find(f)
	if d.At != f || !d.Known || int(d.Uid) != os.Geteuid() || !d.Own() {
		t.Errorf("Find(%s) = %+v, want the file, this user's own", f, d)
	}
	if got, want := d.OwnerNote(), fmt.Sprintf(" (its owner: uid %d)", os.Geteuid()); got != want {
		t.Errorf("OwnerNote = %q, want %q", got, want)
	}
	gone := filepath.Join(filepath.Dir(f), "gone")
	if d := Find(gone); d.At != gone || d.Known || d.Own() || d.OwnerNote() != "" {
		t.Errorf("Find(%s) = %+v (note %q), want the path, its owner unknown", gone, d, d.OwnerNote())
	}
	_, err := os.Open(gone)
	if d, ok := FindErr(err); !ok || d.At != gone {
		t.Errorf("FindErr(%v) = %+v, %v, want %s", err, d, ok, gone)
	}
	if d, ok := FindErr(errors.New("no path")); ok {
		t.Errorf("FindErr of an error naming no path = %+v, true", d)
	}
}

package invoke

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/asuser"
)

// TestRemoveAllDeepUnwritable: a workdir in which a provider nested
// directories past PATH_MAX and made the deepest one unwritable (0500,
// with a file in it) is removed, by a user who is not root (as root, the
// test runs itself as uid 65534: root ignores the modes). The fallback
// walked by path, stopped at PATH_MAX (ENAMETOOLONG), and the workdir
// outlived its run and every later sweep, the previous run's files in it.
func TestRemoveAllDeepUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as uid 65534")
		asuser.RunTest(t, asuser.Dir(t, "cruxprov-workdir-"), t.Name())
		return
	}
	dir := filepath.Join(t.TempDir(), "cruxprov-run-1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for range 20 { // 20 × 251 bytes: past PATH_MAX (4096)
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "left-behind", unix.O_WRONLY|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("data of the previous run\n"))
	unix.Close(f)
	if err := unix.Fchmod(fd, 0o500); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	removeAll(dir)
	if _, err := os.Lstat(dir); err == nil {
		t.Fatalf("the workdir %s outlived its removal", dir)
	}
}

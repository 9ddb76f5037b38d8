package index

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// unwritableParentChildEnv hands TestBuildUnwritableParentChild its
// directory.
const unwritableParentChildEnv = "CRUXPROV_INDEX_UNWRITABLE_PARENT_CHILD"

// TestBuildUnwritableParent: operator.md's `cruxprov index build
// /srv/mirror` run by a user who cannot write /srv said only "cannot open
// the build lock: open /srv/.mirror.lock: permission denied", naming a
// file the operator never asked for and no way on; and a mirror directory
// made for the operator under such a parent failed the same way. The
// error now names the directory that must be writable, why (the index is
// built beside DIR and renamed into place), and what to give instead;
// nothing is written. Runs as uid 65534 when the test runs as root (root
// ignores modes).
func TestBuildUnwritableParent(t *testing.T) {
	var base string
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as an unprivileged user (root writes into a read-only directory)")
		base = asuser.Dir(t, "cruxprov-index-unwritable-")
	} else {
		base = t.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(base, "wheels"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeWheel(t, filepath.Join(base, "wheels"), "alpha", "1.0", "")
	// srv/: read-only, nothing in it. given/mirror: a directory anyone may
	// write, in a read-only parent (made by root, handed to the operator).
	for _, d := range []string{"srv", "given/mirror"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testdir.Writable(base) })
	for d, mode := range map[string]os.FileMode{"srv": 0o555, "given": 0o555, "given/mirror": 0o777} {
		if err := os.Chmod(filepath.Join(base, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() != 0 {
		unwritableParentChild(t, base)
		return
	}
	asuser.RunTest(t, base, "TestBuildUnwritableParentChild", unwritableParentChildEnv+"="+base)
}

// TestBuildUnwritableParentChild is the unprivileged half of
// TestBuildUnwritableParent.
func TestBuildUnwritableParentChild(t *testing.T) {
	base := os.Getenv(unwritableParentChildEnv)
	if base == "" {
		t.Skip("TestBuildUnwritableParent runs it as uid 65534")
	}
	unwritableParentChild(t, base)
}

func unwritableParentChild(t *testing.T, base string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Fatal("root ignores the directories' modes: run as another user")
	}
	from := filepath.Join(base, "wheels")
	for _, c := range []struct{ name, dir, parent string }{
		{"read-only parent", filepath.Join(base, "srv", "mirror"), filepath.Join(base, "srv")},
		{"writable dir, read-only parent", filepath.Join(base, "given", "mirror"), filepath.Join(base, "given")},
		{"parent to make under a read-only one", filepath.Join(base, "srv", "www", "mirror"), filepath.Join(base, "srv", "www")},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tree(t, filepath.Dir(c.parent))
			_, err := Build(context.Background(), c.dir, from)
			if err == nil {
				t.Fatal("built into an unwritable parent")
			}
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%v does not wrap the permission error", err)
			}
			msg := err.Error()
			for _, want := range []string{"cannot write in " + c.parent, "parent directory must be writable", "give a directory in a place you can write"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q does not say %q", msg, want)
				}
			}
			if got := tree(t, filepath.Dir(c.parent)); got != before {
				t.Errorf("the build wrote something:\n%s", got)
			}
		})
	}
}

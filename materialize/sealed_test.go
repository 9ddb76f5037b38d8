package materialize

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/seal"
)

// TestCreateModesUmask077: an env made by an operator whose umask is 077
// is still one every executor can read (DESIGN §6: the store belongs to
// an operator, executors read it; docs/store.md "Modes and owners"): its
// directories 0555, its files 0444 (0555 when executable, the bytecode
// the interpreter wrote included), its seal and stat index 0444, its lock
// file 0644, envs/ 0755. The store-level modes under umask 077 were
// tested (TestGovWalkUmask077), an env's were not.
func TestCreateModesUmask077(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.NoCompile = false // python writes __pycache__ under the umask too
	res, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		filepath.Join(st.Home(), "envs"): 0o755,
		seal.SealPath(res.Dir):           0o444,
		seal.StatIndexPath(res.Dir):      0o444,
		filepath.Join(st.Home(), "envs", "."+filepath.Base(res.Dir)+".lock"): 0o644,
	}
	for p, m := range want {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if fi.Mode().Perm() != m {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), m)
		}
	}
	pyc := 0
	err = filepath.WalkDir(res.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil
		case fi.IsDir():
			if fi.Mode().Perm() != 0o555 {
				t.Errorf("%s: mode %v, want 0555", p, fi.Mode().Perm())
			}
		case fi.Mode().Perm() != 0o444 && fi.Mode().Perm() != 0o555:
			t.Errorf("%s: mode %v, want 0444 or 0555", p, fi.Mode().Perm())
		}
		if filepath.Ext(p) == ".pyc" {
			pyc++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pyc == 0 {
		t.Error("no bytecode in the env: the compile this test checks the modes of did not run")
	}
}

// TestCreateSealsLibpython: where the env's interpreter links a shared
// libpython (pyenv's builds do), the seal records its real path, size and
// sha256 beside the interpreter's (DESIGN §7), so that verify can hold it.
func TestCreateSealsLibpython(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	if req.Interpreter.LibPython == "" {
		t.Skipf("%s links no shared libpython", realPython)
	}
	res, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.Load(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := seal.IdentityOf(req.Interpreter.LibPython)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Interpreter.LibPython
	if got == nil || got.Path != want.Path || got.SHA256 != want.SHA256 || got.Size != want.Size {
		t.Fatalf("sealed libpython %+v, want %+v", got, want)
	}
}

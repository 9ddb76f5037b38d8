package seal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// TestLibpythonDriftIsInterpreterDrift: DESIGN §7 seals the interpreter's
// identity "and the same for its libpython where it links one"; verify
// holds the libpython to it as it holds the interpreter: other bytes of
// the same size and mtime (fast and deep), or the file removed, are
// interpreter_drift naming the libpython's path. The interpreter's own
// checks were tested (TestInterpreterSameStatOtherBytes), the
// libpython's were not.
func TestLibpythonDriftIsInterpreterDrift(t *testing.T) {
	env := sealTree(t, manyEntries(1, 2))
	lib := filepath.Join(filepath.Dir(env.python), "libpython3.11.so.1.0")
	if err := os.WriteFile(lib, bytes.Repeat([]byte("not really a library\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(env.dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := IdentityOf(lib)
	if err != nil {
		t.Fatal(err)
	}
	s.Interpreter.LibPython = &id
	sb, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(SealPath(env.dir), 0o644)
	if err := os.WriteFile(SealPath(env.dir), sb, 0o444); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, deep := range []bool{false, true} {
		if _, err := Verify(ctx, env.dir, Options{Deep: deep}); err != nil {
			t.Fatalf("deep=%v, libpython unchanged: %v", deep, err)
		}
	}
	fi, _ := os.Stat(lib)
	b, _ := os.ReadFile(lib)
	b[0] ^= 0xff
	time.Sleep(10 * time.Millisecond) // a ctime tick later on any kernel
	if err := os.WriteFile(lib, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(lib, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
			rep, err := Verify(ctx, env.dir, Options{Deep: deep})
			if !errors.Is(err, refusal.InterpreterDrift) || len(rep.Differences) == 0 || rep.Differences[0].Path != lib || rep.Differences[0].Change != Content {
				t.Errorf("deep=%v, libpython's bytes changed (size and mtime kept): %v", deep, err)
			}
		})
	}
	os.Remove(lib)
	rep, err := Verify(ctx, env.dir, Options{})
	if !errors.Is(err, refusal.InterpreterDrift) || len(rep.Differences) == 0 || rep.Differences[0].Path != lib || rep.Differences[0].Change != Removed {
		t.Errorf("libpython removed: %v", err)
	}
}

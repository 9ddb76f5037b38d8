package seal

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

// TestQAUnreadableInterpreterIsNotRemoved: as uid 65534, an interpreter
// in a root-only directory (lstat fails) or a root-only file (the rehash
// fails) is the change "unreadable" with a detail saying it cannot be
// read and to verify as a user who can, never "removed". The test
// re-runs its own binary under setpriv.
func TestQAUnreadableInterpreterIsNotRemoved(t *testing.T) {
	if p := os.Getenv("CRUXPROV_SEAL_QA_CHILD"); p != "" {
		var id FileIdentity
		if err := json.Unmarshal([]byte(p), &id); err != nil {
			t.Fatal(err)
		}
		r := &Report{Env: "ENV"}
		for _, deep := range []bool{false, true} {
			d, ok := checkIdentity(&id, deep)
			if ok {
				t.Fatalf("deep=%v: an unreadable interpreter checked ok", deep)
			}
			r.Differences = []Difference{d}
			err := r.Err()
			msg := err.Error()
			if d.Change != Unreadable || !errors.Is(err, refusal.InterpreterUnverifiable) || refusal.RemedyOf(err) != nil || strings.Contains(msg, "removed") ||
				!strings.Contains(msg, "cannot read it: permission denied") || !strings.Contains(msg, "as a user who can read the interpreter") {
				t.Errorf("deep=%v: change %q, %v", deep, d.Change, err)
			}
		}
		return
	}
	if _, err := exec.LookPath("setpriv"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv")
	}
	base, err := os.MkdirTemp("", "cruxprov-seal-qa-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "py"), 0o755); os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	self, _ := os.ReadFile(os.Args[0])
	exe := filepath.Join(base, "seal.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(base, "py")
	os.Mkdir(py, 0o755)
	python := filepath.Join(py, "python3")
	if err := os.WriteFile(python, []byte("not really an interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := IdentityOf(python)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(id)
	for _, locked := range []string{py, python} {
		os.Chmod(locked, 0o700)
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "-test.run=^TestQAUnreadableInterpreterIsNotRemoved$", "-test.v")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "CRUXPROV_SEAL_QA_CHILD=" + string(b)}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s unreadable: %v\n%s", locked, err, out)
		}
		os.Chmod(locked, 0o755)
	}
}

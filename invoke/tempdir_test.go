package invoke_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
)

// TestMultiprocessingLeavesNoTempDir: a provider that starts processes
// by spawn and forkserver leaves nothing in its temporary directory.
// multiprocessing makes a directory there (pymp-*, the forkserver's
// socket) that only its atexit hook removes, and the harness ends by
// os._exit: every such run left one behind (in /tmp, where a provider's
// temp files go unless the call allows TMPDIR), ~200 of them after a
// day of CI. The harness removes it now.
func TestMultiprocessingLeavesNoTempDir(t *testing.T) {
	f := fixture(t)
	// Not t.TempDir(): a socket's path (pymp-*/listener-* in it) must fit
	// in 108 bytes.
	tmp, err := os.MkdirTemp("", "cruxprov-mp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	parent := t.TempDir()
	ex := &invoke.Subprocess{WorkdirParent: parent}
	c := f.Call("startup", map[string]any{"start": true}, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
	c.Environ, c.Allow = []string{"TMPDIR=" + tmp}, []string{"TMPDIR"}
	res, err := ex.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusOK {
		t.Fatalf("%s %+v", res.Status, res.Error)
	}
	for _, d := range []string{tmp, parent} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("left in %s: %v", d, ents)
		}
	}
}

// TestRunTempFilesInItsWorkdir: a run's TMPDIR is its own workdir, so the
// temporary files a provider makes are removed with it; before, with no
// TMPDIR in its environment, Python's tempfile put them in the host's
// /tmp, where they outlived the run. A TMPDIR the caller allows or injects
// is kept, and a workdir too long for a Unix socket under it (108 bytes,
// multiprocessing's forkserver makes one in TMPDIR) is not given.
func TestRunTempFilesInItsWorkdir(t *testing.T) {
	f := fixture(t)
	probe := func(t *testing.T, parent string, environ, allow []string) (cwd string, env map[string]string) {
		t.Helper()
		c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
		c.Environ, c.Allow = environ, allow
		res, err := (&invoke.Subprocess{WorkdirParent: parent}).Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != invoke.StatusOK {
			t.Fatalf("%s %+v", res.Status, res.Error)
		}
		var v struct {
			Cwd     string            `json:"cwd"`
			Environ map[string]string `json:"environ"`
		}
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatal(err)
		}
		return v.Cwd, v.Environ
	}
	short, err := os.MkdirTemp("", "cx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Run("workdir", func(t *testing.T) {
		cwd, env := probe(t, short, []string{"TMPDIR=/host/tmp"}, nil)
		if tmp, ok := env["TMPDIR"]; !ok || tmp != cwd {
			t.Errorf("TMPDIR %q (set: %v), want the run's workdir %s", tmp, ok, cwd)
		}
	})
	t.Run("allowed", func(t *testing.T) {
		if _, env := probe(t, short, []string{"TMPDIR=/host/tmp"}, []string{"TMPDIR"}); env["TMPDIR"] != "/host/tmp" {
			t.Errorf("TMPDIR %q, want the caller's /host/tmp", env["TMPDIR"])
		}
	})
	t.Run("too long for a socket", func(t *testing.T) {
		long := filepath.Join(short, strings.Repeat("d", 80))
		if err := os.Mkdir(long, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, env := probe(t, long, nil, nil); env["TMPDIR"] != "" {
			t.Errorf("TMPDIR %q under a workdir over %d bytes", env["TMPDIR"], 75)
		}
	})
}

package invoke_test

import (
	"context"
	"os"
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

package digest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDocProse: docs/digests.md specifies the bytes. A second
// implementation written from its prose alone (testdata/digests/fromdoc.py,
// Python, sharing no code with this package or gen.mjs) recomputes every
// vector of its table, the canonical bytes it shows, its RFC 8785 examples,
// the tree it describes (built on disk) and its shell command, and gets
// the doc's answers. Before, the doc's seal content digest said "the seal
// document with … left out", which a later minor's members (ignored by a
// reader, not hashed) contradicted: seal-content-v2.2.
func TestDocProse(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	out, err := exec.Command(py, filepath.Join(vectorDir, "fromdoc.py"), "../docs/digests.md").CombinedOutput()
	if err != nil {
		t.Fatalf("fromdoc.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

package digest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGenReproducesVectors: every expected output in testdata/digests is
// what gen.mjs (Node.js, independent of the Go code) computes, as the doc
// and the README say: gen.mjs run on a copy changes no file.
func TestGenReproducesVectors(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	des, err := os.ReadDir(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	want := map[string][]byte{}
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(vectorDir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want[de.Name()] = b
		if err := os.WriteFile(filepath.Join(dir, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(node, filepath.Join(dir, "gen.mjs")).CombinedOutput(); err != nil {
		t.Fatalf("gen.mjs: %v\n%s", err, out)
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("testdata/digests/%s is not what gen.mjs computes: run node testdata/digests/gen.mjs", name)
		}
	}
}

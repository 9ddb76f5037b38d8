package materialize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkdirStaging always creates one empty directory, named path or
// path-<hex>, and leaves no other behind (nor its placement probe).
func TestMkdirStaging(t *testing.T) {
	parent := t.TempDir()
	for i := 0; i < 5; i++ {
		want := filepath.Join(parent, "env"+strings.Repeat("x", i))
		got, err := mkdirStaging(want)
		if err != nil {
			t.Fatal(err)
		}
		if got != want && !strings.HasPrefix(got, want+"-") {
			t.Fatalf("mkdirStaging(%s) = %s", want, got)
		}
		if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", got, err)
		}
		if ents, err := os.ReadDir(got); err != nil || len(ents) != 0 {
			t.Fatalf("%s holds %v (%v), want nothing", got, ents, err)
		}
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 5 {
		t.Fatalf("%d directories left, want 5", len(ents))
	}
}

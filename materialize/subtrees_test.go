package materialize

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/treehash"
)

// TestFinalSubtrees: once the install is over, the parts of the env
// frozen while bytecode is written are the directories that hold no
// source, directly or below, and where no __pycache__ is made: never a
// source's directory, its __pycache__ (shipped or not) or an ancestor.
func TestFinalSubtrees(t *testing.T) {
	l := Layout{SitePackages: "lib/python3.11/site-packages", Bin: "bin"}
	ins := newInstaller("/unused", "/srv/envs/x", l)
	sp := l.SitePackages + "/"
	files := []string{
		"bin/tool",
		sp + "pkg/__init__.py",
		sp + "pkg/__pycache__/shipped.cpython-311.pyc", // a wheel's own pyc dir: bytecode goes there too
		sp + "pkg/data/table.json",
		sp + "pkg/data/more/deep.bin",
		sp + "pkg/sub/mod.py",
		sp + "pkg/sub/templates/a.html",
		sp + "pkg-1.0.dist-info/RECORD",
		sp + "other/only/leaf.py", // a source deep below a directory with none of its own
		sp + "other/assets/x.css",
		"share/doc/pkg/README",
	}
	for _, f := range files {
		ins.record(f, seal.Known{Size: 1})
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			ins.dirs[d] = true
		}
	}
	roots, known := ins.finalSubtrees()
	slices.Sort(roots)
	want := []string{
		"bin",
		sp + "other/assets",
		sp + "pkg-1.0.dist-info",
		sp + "pkg/data",
		sp + "pkg/sub/templates",
		"share",
	}
	if !slices.Equal(roots, want) {
		t.Errorf("final subtrees:\n got %q\nwant %q", roots, want)
	}
	if len(known) != len(files) {
		t.Errorf("known: %d entries, want %d", len(known), len(files))
	}
	known["x"] = seal.Known{}
	if _, ok := ins.known["x"]; ok {
		t.Error("finalSubtrees handed out the installer's own map")
	}
}

// checkStats fails t unless every entry of env's stat index has the stat
// its path has now: the stamps taken while writing, and the parts frozen
// early, are what a stat after sealing finds.
func checkStats(t *testing.T, env string) {
	t.Helper()
	b, err := os.ReadFile(seal.StatIndexPath(env))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := seal.ParseStatIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ix.Entries {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(env, filepath.FromSlash(e.Path)), &st); err != nil {
			t.Fatal(err)
		}
		size := st.Size
		if e.Kind == treehash.Dir {
			size = 0
		}
		if e.Ino != st.Ino || e.Mode != st.Mode&0o7777 || e.Size != size || e.MtimeNS != st.Mtim.Nano() || e.CtimeNS != st.Ctim.Nano() {
			t.Errorf("%s: indexed %+v, the env has ino %d mode %o size %d mtime %d ctime %d", e.Path, e, st.Ino, st.Mode&0o7777, size, st.Mtim.Nano(), st.Ctim.Nano())
		}
	}
}

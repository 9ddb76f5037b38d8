package seal

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/treehash"
)

// checkIndex fails t unless ix lists exactly the entries below root, each
// with the stat it has now and, for files, the sha256 of its bytes.
func checkIndex(t *testing.T, root string, ix *StatIndex) {
	t.Helper()
	byPath := map[string]Entry{}
	for _, e := range ix.Entries {
		if _, dup := byPath[e.Path]; dup {
			t.Errorf("%s: listed twice", e.Path)
		}
		byPath[e.Path] = e
	}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		n++
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		e, ok := byPath[rel]
		if !ok {
			t.Errorf("%s: not in the index", rel)
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		want := entryOf(rel, &st, e.Kind)
		want.SHA256 = e.SHA256
		if e != want {
			t.Errorf("%s: indexed %+v, the tree has %+v", rel, e, want)
		}
		if e.Kind == treehash.File {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if sha256.Sum256(b) != e.SHA256 {
				t.Errorf("%s: indexed sha256 is not its bytes'", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(ix.Entries) {
		t.Errorf("the index lists %d entries, the tree has %d", len(ix.Entries), n)
	}
}

// writeKnown creates root/rel (mode 0444) with b the way an installer
// does, and notes it in known with its stamp.
func writeKnown(t *testing.T, root, rel string, b []byte, known map[string]Known) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, b); err != nil {
		t.Fatal(err)
	}
	s, err := StampOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	known[rel] = Known{Size: int64(len(b)), SHA256: sha256.Sum256(b), Stamp: s}
}

// TestFreezerInParts: subtrees frozen while files are still written
// elsewhere, then the rest: the index is the whole tree's, every entry with
// its stat and sha256, the frozen subtrees listed once; files with a stamp
// are indexed as stamped, one without is stat'ed and hashed.
func TestFreezerInParts(t *testing.T) {
	root := filepath.Join(testdir.New(t), "env")
	known := map[string]Known{}
	for _, rel := range []string{"a/x.json", "a/deep/y.json", "b/c/z.txt", "b/src.py", "d/e.py", "top.txt"} {
		writeKnown(t, root, rel, []byte("bytes of "+rel), known)
	}
	if err := os.WriteFile(filepath.Join(root, "b/c/unknown"), []byte("no stamp, not known"), 0o644); err != nil {
		t.Fatal(err)
	}
	fz := NewFreezer(root, 2)
	if err := fz.Subtrees(context.Background(), []string{"b/c", "a"}, known); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/deep", "b/c"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || fi.Mode().Perm() != 0o555 {
			t.Fatalf("%s: %v %v, want frozen", d, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(root, "b/c/unknown")); fi.Mode().Perm() != 0o444 {
		t.Errorf("b/c/unknown: mode %v, want 0444", fi.Mode().Perm())
	}
	// Written after: bytecode next to the sources.
	writeKnown(t, root, "b/__pycache__/src.pyc", []byte("pyc"), known)
	writeKnown(t, root, "d/__pycache__/e.pyc", []byte("pyc"), known)
	ix, err := fz.Finish(context.Background(), known)
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, root, ix)
	if fi, _ := os.Stat(root); fi.Mode().Perm() != 0o555 {
		t.Errorf("root: mode %v, want 0555", fi.Mode().Perm())
	}
}

// TestFreezeStamps: a stamp stands for a stat only with the inode the
// directory lists, the sealed mode and the known size; otherwise Freeze
// takes the stat itself (and seals the mode), so a stale or foreign stamp
// never reaches the index.
func TestFreezeStamps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(k *Known)
	}{
		{"good", func(*Known) {}},
		{"other inode", func(k *Known) { k.Stamp.Ino++; k.Stamp.MtimeNS++ }},
		{"unsealed mode", func(k *Known) { k.Stamp.Mode = 0o644; k.Stamp.MtimeNS++ }},
		{"other size", func(k *Known) { k.Stamp.Size++; k.Stamp.MtimeNS++ }},
		{"none", func(k *Known) { k.Stamp = Stamp{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(testdir.New(t), "env")
			known := map[string]Known{}
			writeKnown(t, root, "pkg/mod.py", []byte("x = 1\n"), known)
			k := known["pkg/mod.py"]
			tc.spoil(&k)
			known["pkg/mod.py"] = k
			ix, err := Freeze(context.Background(), root, known, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkIndex(t, root, ix) // a spoilt stamp taken would show as a wrong mtime
		})
	}
	// And a good stamp is what the index records: no stat of Freeze's own.
	root := filepath.Join(testdir.New(t), "env")
	known := map[string]Known{}
	writeKnown(t, root, "mod.py", []byte("x = 1\n"), known)
	k := known["mod.py"]
	k.Stamp.CtimeNS-- // as if taken a moment before
	known["mod.py"] = k
	ix, err := Freeze(context.Background(), root, known, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Entries) != 1 || ix.Entries[0].CtimeNS != k.Stamp.CtimeNS {
		t.Errorf("indexed %+v, want the stamp's ctime %d", ix.Entries, k.Stamp.CtimeNS)
	}
}

// TestFreezerRefuses: subtrees that are the root, nested, frozen twice or
// not directories are refused; a frozen subtree replaced or gone by the
// time the rest is frozen fails the seal.
func TestFreezerRefuses(t *testing.T) {
	newTree := func(t *testing.T) string {
		root := filepath.Join(testdir.New(t), "env")
		for _, d := range []string{"a/b", "c"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "f"), nil, 0o444); err != nil {
			t.Fatal(err)
		}
		return root
	}
	for _, rels := range [][]string{{""}, {"."}, {"a", "a/b"}, {"../x"}, {"f"}, {"missing"}} {
		t.Run(strings.Join(rels, ","), func(t *testing.T) {
			if err := NewFreezer(newTree(t), 1).Subtrees(context.Background(), rels, nil); err == nil {
				t.Errorf("Subtrees(%q) froze", rels)
			}
		})
	}
	t.Run("twice", func(t *testing.T) {
		fz := NewFreezer(newTree(t), 1)
		if err := fz.Subtrees(context.Background(), []string{"a"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := fz.Subtrees(context.Background(), []string{"a"}, nil); err == nil {
			t.Error("a subtree frozen twice")
		}
	})
	t.Run("replaced", func(t *testing.T) {
		root := newTree(t)
		fz := NewFreezer(root, 1)
		if err := fz.Subtrees(context.Background(), []string{"a"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := fz.Finish(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "changed while it was sealed") {
			t.Errorf("Finish: %v, want the subtree changed", err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		root := newTree(t)
		fz := NewFreezer(root, 1)
		if err := fz.Subtrees(context.Background(), []string{"c"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(root, "c"), filepath.Join(root, "a/c")); err != nil {
			t.Skipf("cannot move a frozen directory to another parent here: %v", err)
		}
		if _, err := fz.Finish(context.Background(), nil); err == nil {
			t.Error("Finish sealed a tree whose frozen subtree moved")
		}
	})
}

package seal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

// testEnv is a tree frozen, indexed and committed the way materialize
// commits an env, with a stand-in interpreter file.
type testEnv struct {
	dir    string // envs/<hex>
	python string // the interpreter file the seal names
}

// sealTree builds a tree with populate in a staging directory of a fresh
// home, freezes it and commits it as envs/<hex>. The seal's inputs are
// real digests of an empty resolution and the stand-in interpreter.
func sealTree(t testing.TB, populate func(t testing.TB, root string)) testEnv {
	t.Helper()
	home := testdir.New(t)
	python := filepath.Join(home, "python3.11")
	if err := os.WriteFile(python, bytes.Repeat([]byte("not really an interpreter\n"), 100), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := IdentityOf(python)
	if err != nil {
		t.Fatal(err)
	}
	const platform = "cp311-manylinux_2_36_x86_64"
	// One package (not really installed: the seal only names it), so that
	// its fields can be edited too (TestSealFieldsCovered).
	pkg := Package{Name: "example", Version: "1.0", Filename: "example-1.0-py3-none-any.whl", SHA256: digest.Sum([]byte("example")), Size: 123}
	rd, err := digest.ResolutionDigest([]digest.ResolvedWheel{pkg})
	if err != nil {
		t.Fatal(err)
	}
	di := digest.Interpreter{Path: python, Version: "3.11.7"}
	md, err := digest.LocalMaterializationDigest(platform, di, rd, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &Seal{
		Materialization: Materialization{Digest: md, Platform: platform, Interpreter: di, Resolution: rd},
		Resolution:      Resolution{Digest: rd, Platform: platform, Packages: []Package{pkg}},
		Interpreter:     InterpreterIdentity{FileIdentity: id, Version: "3.11.7", Implementation: "cpython"},
		Env:             Env{Python: "bin/python", SitePackages: "lib/python3.11/site-packages"},
		Tool:            "cruxprov/test",
	}
	envs := filepath.Join(home, "envs")
	staging := filepath.Join(home, "staging")
	for _, d := range []string{envs, staging} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	populate(t, staging)
	// Every env holds the venv's python link and site-packages (the seal
	// names them and verify checks the tree has them).
	if err := os.MkdirAll(filepath.Join(staging, "lib/python3.11/site-packages"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(staging, "bin"), 0o755)
	if _, err := os.Lstat(filepath.Join(staging, "bin/python")); err != nil {
		if err := os.Symlink(python, filepath.Join(staging, "bin/python")); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := Freeze(context.Background(), staging, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(envs, md.Hex())
	if _, err := Commit(staging, dir, s, ix); err != nil {
		t.Fatal(err)
	}
	return testEnv{dir: dir, python: python}
}

// manyEntries populates a tree of dirs×files files (and a nested
// directory and a symlink per directory), more entries than the stat pass
// gives one worker at a time.
func manyEntries(dirs, files int) func(t testing.TB, root string) {
	return func(t testing.TB, root string) {
		t.Helper()
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(filepath.Join(root, "bin"), 0o755))
		must(os.Symlink("python3.11", filepath.Join(root, "bin", "python")))
		for d := range dirs {
			pkg := filepath.Join(root, "lib", "python3.11", "site-packages", fmt.Sprintf("pkg%03d", d))
			must(os.MkdirAll(filepath.Join(pkg, "sub"), 0o755))
			must(os.Symlink("sub", filepath.Join(pkg, "link")))
			for f := range files {
				must(os.WriteFile(filepath.Join(pkg, fmt.Sprintf("m%03d.py", f)), []byte(strings.Repeat(fmt.Sprintf("v%d = %d\n", f, d), 1+f%7)), 0o644))
			}
			must(os.WriteFile(filepath.Join(pkg, "sub", "tool.sh"), []byte("#!/bin/sh\n"), 0o755))
		}
	}
}

func indexOf(t testing.TB, dir string) *StatIndex {
	t.Helper()
	b, err := os.ReadFile(StatIndexPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := ParseStatIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestFreezeModes: files 0444 (0555 when executable), directories 0555,
// the root last; the index lists every entry with the stat taken after.
func TestFreezeModes(t *testing.T) {
	env := sealTree(t, manyEntries(3, 4))
	ix := indexOf(t, env.dir)
	// bin, bin/python, lib, lib/python3.11, site-packages; per package its
	// directory, sub, link, 4 files and sub/tool.sh.
	if want := 5 + 3*8; len(ix.Entries) != want {
		t.Errorf("%d entries, want %d", len(ix.Entries), want)
	}
	n := 0
	err := filepath.WalkDir(env.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		want := fs.FileMode(0o444)
		switch {
		case fi.IsDir() || strings.HasSuffix(p, ".sh"):
			want = 0o555
		case fi.Mode()&fs.ModeSymlink != 0:
			want = fi.Mode().Perm()
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		if p != env.dir {
			n++
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

// TestFastVerifySeesEveryEntry: with one to eight workers, the stat pass
// examines every indexed entry, and a change at any position (the first
// entry, the last, either side of a chunk boundary) is found with its
// code, at its path.
func TestFastVerifySeesEveryEntry(t *testing.T) {
	env := sealTree(t, manyEntries(24, 20))
	ix := indexOf(t, env.dir)
	if len(ix.Entries) < 4*statChunk {
		t.Fatalf("only %d entries", len(ix.Entries))
	}
	var files []int
	for i, e := range ix.Entries {
		if e.Kind == treehash.File {
			files = append(files, i)
		}
	}
	picks := map[int]bool{files[0]: true, files[len(files)-1]: true}
	for _, at := range []int{statChunk - 1, statChunk, 2*statChunk - 1, 2 * statChunk, len(ix.Entries) / 2} {
		for _, i := range files {
			if i >= at {
				picks[i] = true
				break
			}
		}
	}
	for _, jobs := range []int{0, 1, 2, 3, 8} {
		t.Run(fmt.Sprintf("jobs=%d", jobs), func(t *testing.T) {
			rep, err := Verify(context.Background(), env.dir, Options{Jobs: jobs})
			if err != nil {
				t.Fatalf("jobs=%d: %v", jobs, err)
			}
			touched := len(picks) // chmod and back: same bytes, stat changed, rehashed
			if jobs == 0 {
				touched = 0
			}
			if rep.Entries != len(ix.Entries) || rep.Rehashed != touched {
				t.Errorf("jobs=%d: examined %d entries, rehashed %d; the index has %d", jobs, rep.Entries, rep.Rehashed, len(ix.Entries))
			}
			for i := range picks {
				p := filepath.Join(env.dir, ix.Entries[i].Path)
				if err := os.Chmod(p, 0o644); err != nil {
					t.Fatal(err)
				}
				rep, err := Verify(context.Background(), env.dir, Options{Jobs: jobs})
				os.Chmod(p, fs.FileMode(ix.Entries[i].Mode))
				if !errors.Is(err, refusal.EnvDrift) || len(rep.Differences) != 1 || rep.Differences[0].Change != Mode || rep.Differences[0].Path != ix.Entries[i].Path {
					t.Errorf("jobs=%d, entry %d: %v %+v", jobs, i, err, rep.Differences)
				}
			}
		})
	}
}

// TestFastVerifyDirectories: an entry added in a directory is found even
// when the directory's mode is put back (its ctime changed, so it is
// listed); a directory removed or replaced by a symlink to a copy of itself
// is the directory's difference and every entry below it is removed; an
// added directory is one difference, not one per entry in it.
func TestFastVerifyDirectories(t *testing.T) {
	const pkg = "lib/python3.11/site-packages/pkg001"
	cases := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		first  Difference
		count  int         // differences with Explain
		alt    *Difference // what deep verify may find first instead (it walks in directory order)
	}{
		{"file added, mode put back", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, pkg, "sub"), 0o755)
			os.WriteFile(filepath.Join(dir, pkg, "sub", "evil.py"), nil, 0o444)
			os.Chmod(filepath.Join(dir, pkg, "sub"), 0o555)
		}, Difference{Path: pkg + "/sub/evil.py", Change: Added, Got: "file"}, 1, nil},
		{"directory added", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, pkg), 0o755)
			os.MkdirAll(filepath.Join(dir, pkg, "evil", "deeper"), 0o755)
			os.WriteFile(filepath.Join(dir, pkg, "evil", "x.py"), nil, 0o444)
			os.Chmod(filepath.Join(dir, pkg), 0o555)
		}, Difference{Path: pkg + "/evil", Change: Added, Got: "directory"}, 1, nil},
		{"added at the root", func(t *testing.T, dir string) {
			os.Chmod(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "evil.pth"), nil, 0o444)
			os.Chmod(dir, 0o555)
		}, Difference{Path: "evil.pth", Change: Added, Got: "file"}, 1, nil},
		{"directory removed", func(t *testing.T, dir string) {
			os.Chmod(filepath.Join(dir, pkg), 0o755)
			os.Chmod(filepath.Join(dir, pkg, "sub"), 0o755)
			if err := os.RemoveAll(filepath.Join(dir, pkg, "sub")); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Join(dir, pkg), 0o555)
		}, Difference{Path: pkg + "/sub", Change: Removed, Want: "directory"}, 2, nil},
		{"directory replaced by a symlink to a copy", func(t *testing.T, dir string) {
			p := filepath.Join(dir, pkg)
			os.Chmod(filepath.Dir(p), 0o755)
			if err := os.Rename(p, p+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(p)+".orig", p); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Dir(p), 0o555)
		}, Difference{Path: pkg, Change: Kind, Want: "directory", Got: "symlink"}, 1 + 23 + 1, // itself, the 23 entries below it, pkg001.orig added
			&Difference{Code: refusal.EnvDrift, Path: pkg + ".orig", Change: Added, Got: "directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := sealTree(t, manyEntries(3, 20))
			c.mutate(t, env.dir)
			c.first.Code = refusal.EnvDrift
			for _, deep := range []bool{false, true} {
				rep, err := Verify(context.Background(), env.dir, Options{Deep: deep})
				if !errors.Is(err, refusal.EnvDrift) || len(rep.Differences) != 1 || (rep.Differences[0] != c.first && (!deep || c.alt == nil || rep.Differences[0] != *c.alt)) {
					t.Errorf("deep=%v: %v %+v, want %+v", deep, err, rep.Differences, c.first)
				}
			}
			rep, _ := Verify(context.Background(), env.dir, Options{Explain: true})
			if len(rep.Differences) != c.count {
				t.Errorf("explain: %d differences, want %d: %+v", len(rep.Differences), c.count, rep.Differences)
			}
			for _, d := range rep.Differences[1:] {
				if d.Change != Removed && d.Change != Added {
					t.Errorf("explain: %+v", d)
				}
			}
		})
	}
}

// TestInterpreterSameStatOtherBytes: an interpreter edited in place with
// its size and mtime kept is found by fast verify (its ctime changed, so it
// is rehashed) and by --deep; one whose stat matches the seal entirely but
// whose bytes differ (a ctime cannot be set from user space; the seal's
// stat is rewritten here to stand for it) passes fast verify, as
// documented, and is refused by --deep.
func TestInterpreterSameStatOtherBytes(t *testing.T) {
	env := sealTree(t, manyEntries(1, 2))
	fi, err := os.Stat(env.python)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(env.python)
	b[0] ^= 0xff
	time.Sleep(10 * time.Millisecond) // a ctime tick later on any kernel
	if err := os.WriteFile(env.python, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(env.python, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
			rep, err := Verify(context.Background(), env.dir, Options{Deep: deep})
			if !errors.Is(err, refusal.InterpreterDrift) || rep.Differences[0].Change != Content || rep.Differences[0].Path != env.python {
				t.Errorf("deep=%v, size and mtime kept: %v", deep, err)
			}
		})
	}
	// The seal now states the edited file's stat with the old sha256.
	s, err := Load(env.dir)
	if err != nil {
		t.Fatal(err)
	}
	now, err := IdentityOf(env.python)
	if err != nil {
		t.Fatal(err)
	}
	now.SHA256 = s.Interpreter.SHA256
	s.Interpreter.FileIdentity = now
	sb, _ := s.Marshal()
	os.Chmod(SealPath(env.dir), 0o644)
	if err := os.WriteFile(SealPath(env.dir), sb, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), env.dir, Options{}); err != nil {
		t.Errorf("fast, stat unchanged: %v (fast verify trusts an unchanged stat)", err)
	}
	if _, err := Verify(context.Background(), env.dir, Options{Deep: true}); !errors.Is(err, refusal.InterpreterDrift) {
		t.Errorf("deep, stat unchanged, other bytes: %v", err)
	}
}

// TestUnreadableInterpreterIsNotRemoved: as uid 65534, an interpreter in
// a root-only directory (lstat fails) or a root-only file (the rehash
// fails) is the change "unreadable" with a detail saying it cannot be
// read and to verify as a user who can, never "removed". The test
// re-runs its own binary under setpriv.
func TestUnreadableInterpreterIsNotRemoved(t *testing.T) {
	if p := os.Getenv("CRUXPROV_SEAL_UNREADABLE_CHILD"); p != "" {
		var id FileIdentity
		if err := json.Unmarshal([]byte(p), &id); err != nil {
			t.Fatal(err)
		}
		r := &Report{Env: "ENV"}
		for _, deep := range []bool{false, true} {
			t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
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
			})
		}
		return
	}
	asuser.Require(t, "run as uid 65534")
	base := asuser.Dir(t, "cruxprov-seal-unreadable-")
	exe := asuser.CopySelf(t, base)
	py := filepath.Join(base, "py")
	t.Cleanup(func() { os.Chmod(py, 0o755) }) // before Dir's removal
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
	for _, tc := range []struct{ name, locked string }{{"root-only directory", py}, {"root-only file", python}} {
		t.Run(tc.name, func(t *testing.T) {
			locked := tc.locked
			os.Chmod(locked, 0o700)
			defer os.Chmod(locked, 0o755)
			cmd := asuser.Command(65534, 65534, exe, "-test.run=^TestUnreadableInterpreterIsNotRemoved$", "-test.v")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "CRUXPROV_SEAL_UNREADABLE_CHILD=" + string(b)}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s unreadable: %v\n%s", locked, err, out)
			}
		})
	}
}

// TestTamperedIndexWinsOverDrift: an index that is not the sealed one is
// seal_invalid even when the tree differs from it too (the differences
// found against it are dropped).
func TestTamperedIndexWinsOverDrift(t *testing.T) {
	env := sealTree(t, manyEntries(2, 3))
	ix := indexOf(t, env.dir)
	ix.Entries[len(ix.Entries)-1].Mode = 0o777 // a valid index, not the sealed one
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(StatIndexPath(env.dir), 0o644)
	if err := os.WriteFile(StatIndexPath(env.dir), b, 0o444); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {Explain: true}, {Deep: true}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			rep, err := Verify(context.Background(), env.dir, opts)
			if !errors.Is(err, refusal.SealInvalid) || len(rep.Differences) != 0 {
				t.Errorf("%+v: %v %+v", opts, err, rep.Differences)
			}
		})
	}
}

// TestExplainedSaysWhatToDoNext: every refusal names the next step; with
// several differences, Explained lists them all and the step of each kind
// once.
func TestExplainedSaysWhatToDoNext(t *testing.T) {
	env := Difference{Code: refusal.EnvDrift, Path: "a.py", Change: Content}
	interp := Difference{Code: refusal.InterpreterDrift, Path: "/usr/bin/python3", Change: Identity}
	cases := []struct {
		ds    []Difference
		code  refusal.Code
		wants []string
	}{
		{[]Difference{env}, refusal.EnvDrift, []string{"a.py: content", "rebuild the env under its digest"}},
		{[]Difference{env, env, env}, refusal.EnvDrift, []string{"3 differences", "rebuild the env under its digest"}},
		{[]Difference{interp, env}, refusal.InterpreterDrift, []string{"2 differences", "/usr/bin/python3", "a.py", "rebuild the env on it as it is now", "rebuild the env under its digest"}},
	}
	for _, c := range cases {
		t.Run(c.wants[0], func(t *testing.T) {
			r := &Report{Env: "ENV", Differences: c.ds}
			err := r.Explained()
			if !errors.Is(err, c.code) {
				t.Errorf("%+v: %v", c.ds, err)
				return
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionReplaceEnv || rem.Target != "ENV" {
				t.Errorf("%q: remedy %+v, want replace_env ENV", err, rem)
			}
			if strings.Count(err.Error(), "rebuild the env under its digest") > 1 {
				t.Errorf("%q repeats the next step", err)
			}
			if e := r.Err(); !strings.Contains(e.Error(), "; ") || !errors.Is(e, c.code) {
				t.Errorf("Err: %v", e)
			}
		})
	}
	if (&Report{}).Explained() != nil {
		t.Error("no difference, yet a refusal")
	}
}

// BenchmarkVerify verifies a sealed tree of about 4,000 entries (fast:
// one stat per entry; deep: every file rehashed).
func BenchmarkVerify(b *testing.B) {
	env := sealTree(b, manyEntries(150, 24))
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("deep=%v", deep), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Verify(context.Background(), env.dir, Options{Deep: deep}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFreeze freezes a fresh copy of a tree of about 4,000 entries
// whose files the builder already hashed (known), as env create does.
func BenchmarkFreeze(b *testing.B) {
	populate := manyEntries(150, 24)
	tmp := testdir.New(b)
	populate(b, filepath.Join(tmp, "template"))
	ix, err := Freeze(context.Background(), filepath.Join(tmp, "template"), nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	known := map[string]Known{}
	for _, e := range ix.Entries {
		if e.Kind == treehash.File {
			known[e.Path] = Known{Size: e.Size, SHA256: e.SHA256}
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		root := filepath.Join(tmp, fmt.Sprint(i))
		populate(b, root)
		b.StartTimer()
		if _, err := Freeze(context.Background(), root, known, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadPrivate: the stat index is read into a private buffer: a
// directory or a symlink is refused, an empty file is empty, and bytes
// written to the file after the read do not reach the buffer.
func TestReadPrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.index")
	if err := os.WriteFile(p, bytes.Repeat([]byte{1}, 3*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(p)
	if err != nil || len(b) != 3*4096 {
		t.Fatalf("read %d bytes: %v", len(b), err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{2}, 3*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if b[0] != 1 || b[len(b)-1] != 1 {
		t.Error("a later write reached the bytes already read")
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("read a directory")
	}
	os.Symlink(p, filepath.Join(dir, "link"))
	if _, err := ReadFile(filepath.Join(dir, "link")); err == nil {
		t.Error("followed a symlink")
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o444)
	if b, err := ReadFile(empty); err != nil || len(b) != 0 {
		t.Errorf("empty file: %d bytes, %v", len(b), err)
	}
}

// TestInterpreterSizeEdited: a seal whose interpreter size was edited (the
// bytes still hash to the sealed sha256) says so in sizes, not as two
// equal hashes.
func TestInterpreterSizeEdited(t *testing.T) {
	env := sealTree(t, manyEntries(1, 2))
	s, err := Load(env.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Interpreter.Size++
	sb, _ := s.Marshal()
	os.Chmod(SealPath(env.dir), 0o644)
	if err := os.WriteFile(SealPath(env.dir), sb, 0o444); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(context.Background(), env.dir, Options{})
	if !errors.Is(err, refusal.InterpreterDrift) || len(rep.Differences) == 0 {
		t.Fatalf("got %v", err)
	}
	if d := rep.Differences[0]; d.Want == d.Got || !strings.Contains(d.Want, "bytes") {
		t.Errorf("difference %+v", d)
	}
}

// TestUnreadableEnvIsNotMissing: as uid 65534, an env whose envs/ it
// cannot search, or whose seal it cannot read, is seal_invalid saying
// permission was denied and to verify as a user who can read it; before,
// it was seal_missing ("no such directory and no seal"), whose advice is a
// rebuild, which leaves it as unreadable. It carries the remedy that gives
// read access to the path that denied it (grant_read: envs/, or the seal),
// as the registry's refusal of a file it may not read does; it carried
// none, and a Go caller had only the words. Run as root, the test re-runs
// its own binary under setpriv; run as another user, it checks directly.
func TestUnreadableEnvIsNotMissing(t *testing.T) {
	check := func(t *testing.T, dir, denied string) {
		t.Helper()
		_, err := Verify(context.Background(), dir, Options{})
		if msg := fmt.Sprint(err); !errors.Is(err, refusal.SealInvalid) || strings.Contains(msg, "no such directory") ||
			!strings.Contains(msg, "permission denied: verify as a user who can read the env") {
			t.Errorf("Verify = %v, want seal_invalid saying permission was denied", err)
		}
		// Whose the denying path is says who gives access: as uid
		// 65534, root's (its owner); run by the user that owns it,
		// its own, which it gives back (the owner was sent to itself).
		grant := ", or have the owner of " + denied + " (uid 0) give read access to every user"
		if os.Geteuid() != 0 && os.Getenv("CRUXPROV_SEAL_UNREADABLE_ENV_CHILD") == "" {
			grant = ", or give read access back to " + denied + ", which is this user's own"
		}
		if msg := fmt.Sprint(err); !strings.Contains(msg, grant) {
			t.Errorf("Verify = %v, want it to say %q", err, grant)
		}
		if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionGrantRead || rem.Target != denied {
			t.Errorf("Verify = %v, remedy %+v; want grant_read of %s", err, rem, denied)
		}
	}
	if dir := os.Getenv("CRUXPROV_SEAL_UNREADABLE_ENV_CHILD"); dir != "" {
		check(t, dir, os.Getenv("CRUXPROV_SEAL_UNREADABLE_ENV_DENIED"))
		return
	}
	var exe string
	if os.Geteuid() == 0 {
		asuser.Require(t, "run as uid 65534")
		exe = asuser.CopySelf(t, asuser.Dir(t, "cruxprov-seal-unreadable-env-"))
	}
	env := sealTree(t, manyEntries(1, 1))
	envs := filepath.Dir(env.dir)
	for d := filepath.Dir(envs); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's directories are 0700
	}
	locked := map[string]os.FileMode{envs: 0o700, SealPath(env.dir): 0o400}
	if exe == "" { // this user owns them: the modes must deny it, too
		locked = map[string]os.FileMode{envs: 0o000, SealPath(env.dir): 0o000}
	}
	for _, tc := range []struct {
		name, locked string
	}{{"envs/ not searchable", envs}, {"the seal not readable", SealPath(env.dir)}} {
		t.Run(tc.name, func(t *testing.T) {
			fi, err := os.Stat(tc.locked)
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(tc.locked, locked[tc.locked])
			defer os.Chmod(tc.locked, fi.Mode().Perm())
			if exe == "" {
				check(t, env.dir, tc.locked)
				return
			}
			cmd := asuser.Command(65534, 65534, exe, "-test.run=^TestUnreadableEnvIsNotMissing$", "-test.v")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "CRUXPROV_SEAL_UNREADABLE_ENV_CHILD=" + env.dir, "CRUXPROV_SEAL_UNREADABLE_ENV_DENIED=" + tc.locked}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", tc.name, err, out)
			}
		})
	}
}

// TestDifferencesInPathOrder: with Explain, fast and deep verification
// report the same differences in path order (the deep walk meets a
// directory's files before its subdirectories, and the refusal named a
// different "first" difference than fast did), and the tree digest,
// which differs because of the others, is neither first nor counted:
// one changed byte under --deep is not "1 differences" of two.
func TestDifferencesInPathOrder(t *testing.T) {
	env := sealTree(t, manyEntries(3, 5))
	sp := filepath.Join(env.dir, "lib", "python3.11", "site-packages")
	testdir.Writable(env.dir)
	for _, err := range []error{
		os.Remove(filepath.Join(sp, "pkg002", "m001.py")),
		os.WriteFile(filepath.Join(sp, "pkg000", "zz.py"), []byte("x\n"), 0o444),
		os.Chmod(filepath.Join(sp, "pkg001", "sub", "tool.sh"), 0o444),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	refreeze(t, env.dir)
	want := []string{
		"lib/python3.11/site-packages/pkg000/zz.py",
		"lib/python3.11/site-packages/pkg001/sub/tool.sh",
		"lib/python3.11/site-packages/pkg002/m001.py",
	}
	var firsts []string
	for _, deep := range []bool{false, true} {
		rep, _ := Verify(context.Background(), env.dir, Options{Deep: deep, Explain: true})
		var got []string
		for _, d := range rep.Differences {
			if d.Change != TreeDigest {
				got = append(got, d.Path)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("deep=%v: %v, want %v", deep, got, want)
		}
		err := rep.Explained()
		if !strings.Contains(err.Error(), "3 differences: "+want[0]) {
			t.Errorf("deep=%v: %v", deep, err)
		}
		firsts = append(firsts, rep.Err().Error())
	}
	if firsts[0] != firsts[1] || !strings.Contains(firsts[0], want[0]+": added") || !strings.Contains(firsts[0], "(and 2 more difference(s))") {
		t.Errorf("fast and deep name other first differences: %q, %q", firsts[0], firsts[1])
	}
	// One changed byte, deep: one difference, and the tree digest's.
	env = sealTree(t, manyEntries(1, 2))
	testdir.Writable(env.dir)
	p := filepath.Join(env.dir, "lib", "python3.11", "site-packages", "pkg000", "m000.py")
	b, _ := os.ReadFile(p)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, append(b[:len(b)-1], 'X'), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o444)
	refreeze(t, env.dir)
	rep, _ := Verify(context.Background(), env.dir, Options{Deep: true, Explain: true})
	if err := rep.Explained(); err == nil || strings.Contains(err.Error(), "differences") || strings.Contains(err.Error(), "more difference") || !strings.Contains(err.Error(), "m000.py: content") {
		t.Errorf("one changed byte, deep: %v (differences %+v)", err, rep.Differences)
	}
}

// refreeze gives the directories below root (root included) their sealed
// mode back, 0555, after testdir.Writable opened them for a change.
func refreeze(t *testing.T, root string) {
	t.Helper()
	var dirs []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifyAFile: a path that is a file, with no seal beside it, is said
// to be a file (it was "no such directory", of a path that exists).
func TestVerifyAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(f, []byte("x"), 0o644)
	if _, err := Verify(context.Background(), f, Options{}); !errors.Is(err, refusal.SealMissing) || !strings.Contains(err.Error(), "a file, not a directory, and no seal beside it") {
		t.Errorf("%v", err)
	}
}

// TestFIFOSealOrIndexRefused: a FIFO put in place of an env's seal or stat
// index is refused seal_invalid at once; before, Verify (env verify,
// env list, every run) blocked on its open for ever.
func TestFIFOSealOrIndexRefused(t *testing.T) {
	for _, which := range []string{"seal", "index"} {
		t.Run(which, func(t *testing.T) {
			env := sealTree(t, manyEntries(1, 1))
			p := SealPath(env.dir)
			if which == "index" {
				p = StatIndexPath(env.dir)
			}
			os.Chmod(p, 0o644)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			err := testdir.Returns(t, "Verify", func() error {
				_, err := Verify(context.Background(), env.dir, Options{})
				return err
			})
			if !errors.Is(err, refusal.SealInvalid) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Verify: %v, want seal_invalid (not a regular file)", err)
			}
		})
	}
}

// TestExplainedListsByPath: Explained lists the differences sorted by
// path, then change, as verify --explain's drift lines are, where it
// listed them in the order the checks found them (a file's mode before
// its content, the drift lines content first); the code, the remedy and
// the first next step stay the first difference's.
func TestExplainedListsByPath(t *testing.T) {
	ds := []Difference{
		{Code: refusal.InterpreterDrift, Path: "/usr/bin/python3", Change: Identity},
		{Code: refusal.EnvDrift, Path: "b.py", Change: Mode, Want: "0444", Got: "0644"},
		{Code: refusal.EnvDrift, Path: "b.py", Change: Content, Want: "3 bytes", Got: "4 bytes"},
		{Code: refusal.EnvDrift, Path: ".", Change: Mode, Want: "0555", Got: "0755"},
		{Code: refusal.EnvDrift, Path: ".", Change: TreeDigest, Want: "sha256:a", Got: "sha256:b"},
	}
	r := &Report{Env: "ENV", Differences: ds}
	err := r.Explained()
	if !errors.Is(err, refusal.InterpreterDrift) {
		t.Fatalf("code: %v, want the first difference's, interpreter_drift", err)
	}
	if rem := refusal.RemedyOf(err); rem == nil || rem.Action != refusal.ActionReplaceEnv || rem.Target != "ENV" {
		t.Errorf("remedy %+v, want the first difference's", rem)
	}
	var want []string
	for _, d := range []Difference{ds[3], ds[0], ds[2], ds[1]} {
		want = append(want, d.String())
	}
	list := "4 differences: " + strings.Join(want, "; ") + "; " + nextStep(ds[0]) + "; " + nextStep(ds[1])
	if !strings.Contains(err.Error(), list) {
		t.Errorf("%q\nwant it to say %q", err, list)
	}
	if !slices.Equal(r.Differences, ds) {
		t.Errorf("Explained reordered the report's differences: %+v", r.Differences)
	}
}

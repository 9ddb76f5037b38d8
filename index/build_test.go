package index

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cruxible/cruxprov/refusal"

	"github.com/cruxible/cruxprov/internal/treelist"
)

// tree lists everything below root ("absent" when it is not there):
// path, mode and content hash, so two trees compare whole.
func tree(t *testing.T, root string) string {
	t.Helper()
	s, err := treelist.Of(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// noDebris fails when a staging directory of out is left beside it.
func noDebris(t *testing.T, out string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".build-*"))
	if len(left) != 0 {
		t.Errorf("staging left beside the index: %v", left)
	}
}

// TestBuildFailsClosed: a bad wheel after good ones fails the build and
// leaves the output as it was — absent, empty, or the previous index,
// byte for byte — with no staging left beside it.
func TestBuildFailsClosed(t *testing.T) {
	bad := []struct {
		name  string
		write func(t *testing.T, dir string)
		code  error // a refusal code, or nil for any error
	}{
		{"not a zip", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "mid-1.0-py3-none-any.whl"), []byte("this is not a zip archive"), 0o644)
		}, refusal.WheelInvalid},
		{"truncated zip", func(t *testing.T, dir string) {
			b := writeWheel(t, t.TempDir(), "mid", "1.0", "")
			os.WriteFile(filepath.Join(dir, "mid-1.0-py3-none-any.whl"), b[:len(b)/2], 0o644)
		}, refusal.WheelInvalid},
		{"bad file name", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "mid.whl"), writeWheel(t, t.TempDir(), "mid", "1.0", ""), 0o644)
		}, refusal.WheelInvalid},
		{"two METADATA", func(t *testing.T, dir string) {
			writeZip(t, filepath.Join(dir, "mid-1.0-py3-none-any.whl"), "mid-1.0.dist-info/METADATA", "other-1.0.dist-info/METADATA")
		}, refusal.WheelInvalid},
		// Never left out silently: a .whl that is not a regular file
		// once links are followed fails the build.
		{"dangling link", func(t *testing.T, dir string) {
			os.Symlink(filepath.Join(dir, "gone.whl"), filepath.Join(dir, "mid-1.0-py3-none-any.whl"))
		}, nil},
		{"link to a directory", func(t *testing.T, dir string) {
			os.Symlink(t.TempDir(), filepath.Join(dir, "mid-1.0-py3-none-any.whl"))
		}, nil},
		{"directory", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "mid-1.0-py3-none-any.whl"), 0o755)
		}, nil},
	}
	before := []struct {
		name    string
		prepare func(t *testing.T, out string)
	}{
		{"no output yet", func(*testing.T, string) {}},
		{"empty output", func(t *testing.T, out string) { os.Mkdir(out, 0o755) }},
		{"previous index", func(t *testing.T, out string) {
			old := t.TempDir()
			writeWheel(t, old, "old_project", "0.9", ">=3.8")
			writeWheel(t, old, "mid", "0.5", "")
			if _, err := Build(context.Background(), out, old); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, b := range bad {
		for _, pre := range before {
			t.Run(b.name+"/"+pre.name, func(t *testing.T) {
				from := t.TempDir()
				writeWheel(t, from, "aaa", "1.0", "")
				writeWheel(t, from, "aab", "2.0", "")
				b.write(t, from)
				writeWheel(t, from, "zzz", "1.0", "")
				out := filepath.Join(t.TempDir(), "mirror")
				pre.prepare(t, out)
				want := tree(t, out)
				_, err := Build(context.Background(), out, from)
				if err == nil || b.code != nil && !errors.Is(err, b.code) {
					t.Fatalf("Build: %v, want %v", err, b.code)
				}
				// Named by its path, with what to do: a bad wheel's
				// refusal named its file name alone and said nothing
				// more ("mid.whl is not a wheel file name").
				if !strings.Contains(err.Error(), filepath.Join(from, "mid")) || !strings.Contains(err.Error(), "out of the input, nothing was changed") {
					t.Errorf("Build: %v, want the wheel's path, what to do, and that nothing was changed", err)
				}
				if got := tree(t, out); got != want {
					t.Errorf("the failed build changed the output:\n%s\nwas:\n%s", got, want)
				}
				noDebris(t, out)
			})
		}
	}
}

// writeZip writes a zip archive at path whose members are names.
func writeZip(t *testing.T, path string, names ...string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("Metadata-Version: 2.1\nName: x\nVersion: 1.0\n\n"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBuildReplacesWhole: rebuilding over a previous index gives exactly
// what a build into a new directory gives (wheels no longer in the input
// are gone), keeps the directory's permissions, and leaves no staging.
func TestBuildReplacesWhole(t *testing.T) {
	old, next := t.TempDir(), t.TempDir()
	writeWheel(t, old, "alpha", "1.0", "")
	writeWheel(t, old, "beta", "1.0", "")
	writeWheel(t, next, "beta", "2.0", ">=3.9")
	writeWheel(t, next, "gamma", "1.0", "")
	out := filepath.Join(t.TempDir(), "mirror")
	if _, err := Build(context.Background(), out, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o750); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	if _, err := Build(context.Background(), fresh, next); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fresh, 0o750); err != nil {
		t.Fatal(err)
	}
	rep, err := Build(context.Background(), out, next)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Projects != 2 || len(rep.Files) != 2 || rep.Dir != out {
		t.Errorf("report %+v", rep)
	}
	if got, want := tree(t, out), tree(t, fresh); got != want {
		t.Errorf("rebuilt index:\n%s\nwant (a fresh build):\n%s", got, want)
	}
	noDebris(t, out)
	// Rebuilding from the index's own files/ works (the input is read
	// before the old tree goes).
	again := tree(t, out)
	if _, err := Build(context.Background(), out, filepath.Join(out, "files")); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, out); got != again {
		t.Errorf("rebuild from its own files/ changed the index:\n%s\nwas:\n%s", got, again)
	}
}

// TestBuildOutputChecks: an output that is not a directory, or holds
// anything an index build does not write, is refused untouched; a link
// to a directory builds into the directory it names.
func TestBuildOutputChecks(t *testing.T) {
	from := t.TempDir()
	writeWheel(t, from, "alpha", "1.0", "")
	t.Run("a file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "mirror")
		os.WriteFile(out, []byte("keep me"), 0o644)
		if _, err := Build(context.Background(), out, from); err == nil {
			t.Fatal("built over a file")
		}
		if b, _ := os.ReadFile(out); string(b) != "keep me" {
			t.Errorf("file changed: %q", b)
		}
		noDebris(t, out)
	})
	t.Run("foreign content", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "site")
		os.MkdirAll(filepath.Join(out, "simple"), 0o755)
		os.WriteFile(filepath.Join(out, "README"), []byte("mine"), 0o644)
		want := tree(t, out)
		_, err := Build(context.Background(), out, from)
		if err == nil || !strings.Contains(err.Error(), "README") {
			t.Fatalf("Build: %v, want a refusal naming README", err)
		}
		if got := tree(t, out); got != want {
			t.Errorf("output changed:\n%s", got)
		}
		noDebris(t, out)
	})
	t.Run("link to a directory", func(t *testing.T) {
		base := t.TempDir()
		real := filepath.Join(base, "real")
		os.Mkdir(real, 0o755)
		link := filepath.Join(base, "link")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		if _, err := Build(context.Background(), link, from); err != nil {
			t.Fatal(err)
		}
		if l, err := os.Readlink(link); err != nil || l != "real" {
			t.Errorf("the link became %q, %v", l, err)
		}
		if _, err := os.Stat(filepath.Join(real, "simple", "alpha", "index.html")); err != nil {
			t.Error(err)
		}
	})
	t.Run("dangling link", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "link")
		os.Symlink("nowhere", link)
		if _, err := Build(context.Background(), link, from); err == nil {
			t.Fatal("built through a dangling link")
		}
	})
}

// TestBuildRemovesDebris: staging directories left by killed builds are
// removed by the next build.
func TestBuildRemovesDebris(t *testing.T) {
	from := t.TempDir()
	writeWheel(t, from, "alpha", "1.0", "")
	out := filepath.Join(t.TempDir(), "mirror")
	debris := filepath.Join(filepath.Dir(out), ".mirror.build-0123456789ab")
	os.MkdirAll(filepath.Join(debris, "files"), 0o755)
	os.WriteFile(filepath.Join(debris, "files", "half.whl"), []byte("half"), 0o644)
	other := filepath.Join(filepath.Dir(out), ".other.build-0123456789ab")
	os.Mkdir(other, 0o755)
	if _, err := Build(context.Background(), out, from); err != nil {
		t.Fatal(err)
	}
	noDebris(t, out)
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another index's staging was removed: %v", err)
	}
}

// TestBuildCancelled: a cancelled build leaves the previous index.
func TestBuildCancelled(t *testing.T) {
	from := t.TempDir()
	writeWheel(t, from, "alpha", "1.0", "")
	out := filepath.Join(t.TempDir(), "mirror")
	if _, err := Build(context.Background(), out, from); err != nil {
		t.Fatal(err)
	}
	want := tree(t, out)
	writeWheel(t, from, "beta", "1.0", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, out, from); !errors.Is(err, context.Canceled) {
		t.Fatalf("Build: %v", err)
	}
	if got := tree(t, out); got != want {
		t.Errorf("output changed:\n%s", got)
	}
	noDebris(t, out)
}

// TestBuildConcurrent: builds of one output from different inputs at once
// each succeed, and the output is one of the two complete indexes.
func TestBuildConcurrent(t *testing.T) {
	ins := []string{t.TempDir(), t.TempDir()}
	for i, in := range ins {
		for j := range 20 {
			writeWheel(t, in, fmt.Sprintf("p%d_%02d", i, j), "1.0", "")
		}
	}
	var wants []string
	for _, in := range ins {
		d := filepath.Join(t.TempDir(), "mirror")
		if _, err := Build(context.Background(), d, in); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, tree(t, d))
	}
	out := filepath.Join(t.TempDir(), "mirror")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for k := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[k] = Build(context.Background(), out, ins[k%2])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := tree(t, out); got != wants[0] && got != wants[1] {
		t.Errorf("output is neither index:\n%s", got)
	}
	noDebris(t, out)
}

// TestBuildFollowsSymlinks: a directory of symbolic links to wheels (a
// Nix- or stow-style tree), absolute or relative, builds the same index as
// the wheels themselves, under the links' names; a .whl that is not a
// regular file once links are followed fails the build, naming it.
func TestBuildFollowsSymlinks(t *testing.T) {
	real := t.TempDir()
	writeWheel(t, real, "alpha", "1.0", "")
	writeWheel(t, real, "beta", "2.0", ">=3.9")
	want := filepath.Join(t.TempDir(), "want")
	if _, err := Build(context.Background(), want, real); err != nil {
		t.Fatal(err)
	}
	// Every wheel a link: one absolute, one relative, through a link
	// to a link.
	links := t.TempDir()
	if err := os.Symlink(filepath.Join(real, "alpha-1.0-py3-none-any.whl"), filepath.Join(links, "alpha-1.0-py3-none-any.whl")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(links, filepath.Join(real, "beta-2.0-py3-none-any.whl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(links, "hop")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("hop", filepath.Join(links, "beta-2.0-py3-none-any.whl")); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(t.TempDir(), "got")
	rep, err := Build(context.Background(), got, links)
	if err != nil {
		t.Fatalf("a directory of links: %v", err)
	}
	if len(rep.Files) != 2 || rep.Projects != 2 {
		t.Errorf("report %+v, want both wheels", rep)
	}
	if g, w := tree(t, got), tree(t, want); g != w {
		t.Errorf("index from links:\n%s\nwant (from the files):\n%s", g, w)
	}
	// One regular wheel beside the links is read too.
	writeWheel(t, links, "gamma", "1.0", "")
	if rep, err = Build(context.Background(), got, links); err != nil || len(rep.Files) != 3 {
		t.Fatalf("links and a file: %+v, %v", rep, err)
	}

	for _, c := range []struct {
		name, want string
		make       func(t *testing.T, p string)
	}{
		{"dangling link", "symbolic link to", func(t *testing.T, p string) {
			os.Symlink(filepath.Join(t.TempDir(), "gone.whl"), p)
		}},
		{"link to a directory", "not a regular file (a directory)", func(t *testing.T, p string) {
			os.Symlink(t.TempDir(), p)
		}},
		{"directory", "not a regular file (a directory)", func(t *testing.T, p string) {
			os.Mkdir(p, 0o755)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			from := t.TempDir()
			writeWheel(t, from, "alpha", "1.0", "")
			bad := filepath.Join(from, "mid-1.0-py3-none-any.whl")
			c.make(t, bad)
			out := filepath.Join(t.TempDir(), "mirror")
			_, err := Build(context.Background(), out, from)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: %v, want an error naming %s (%q)", err, bad, c.want)
			}
			if _, serr := os.Lstat(out); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("the failed build made %s: %v", out, serr)
			}
			noDebris(t, out)
			// All of them bad: the same error, not "no .whl files".
			os.Remove(filepath.Join(from, "alpha-1.0-py3-none-any.whl"))
			if _, err := Build(context.Background(), out, from); err == nil || !strings.Contains(err.Error(), bad) {
				t.Fatalf("only the bad entry: %v, want an error naming %s", err, bad)
			}
		})
	}
}

// TestBuildNoWheels: an input without wheels says what to give; it said
// "no .whl files in DIR" and nothing of what to do. It is a
// *NoWheelsError, which cmd/ maps to a usage error.
func TestBuildNoWheels(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mirror")
	in := t.TempDir()
	_, err := Build(context.Background(), out, in)
	if err == nil || !strings.Contains(err.Error(), "no .whl files in") || !strings.Contains(err.Error(), "give the directory that holds the wheels") {
		t.Fatalf("Build of no wheels: %v", err)
	}
	// Typed, so that a command line can call it a mistake in its input.
	var nw *NoWheelsError
	if !errors.As(err, &nw) || nw.Dir != in {
		t.Errorf("Build of no wheels: %T %v, want a *NoWheelsError of %s", err, err, in)
	}
	if _, serr := os.Lstat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("the failed build made %s: %v", out, serr)
	}
}

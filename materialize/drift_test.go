package materialize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
)

// sealedDemo creates the demo env in a fresh store and returns its path.
func sealedDemo(t *testing.T) string {
	t.Helper()
	st := newStore(t)
	w := putDemo(t, st)
	res, err := Create(context.Background(), st, request(t, w))
	if err != nil {
		t.Fatal(err)
	}
	return res.Dir
}

// writable gives back write permission on p's directory for the mutation
// (root ignores it, but it says what a non-root writer would have to do);
// restoreDirs puts the sealed mode back so that only the mutation shows.
var reopened []string

func writable(t *testing.T, p string) {
	t.Helper()
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	reopened = append(reopened, filepath.Dir(p))
}

// overwrite replaces the sealed (0444) file p's bytes as its owner would
// have to, write permission given and taken back, so that the content is
// what changed.
func overwrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
}

func restoreDirs() {
	for _, d := range reopened {
		os.Chmod(d, 0o555)
	}
	reopened = nil
}

func TestVerifyDrift(t *testing.T) {
	const sp = "lib/python3.11/site-packages/"
	cases := []struct {
		name   string
		mutate func(t *testing.T, env string)
		code   refusal.Code
		change seal.Change
		path   string
	}{
		{"edit", func(t *testing.T, env string) {
			overwrite(t, env+"/"+sp+"demo/__init__.py", []byte("VALUE = 43  # edited\n"))
		}, refusal.EnvDrift, seal.Content, sp + "demo/__init__.py"},
		{"edit keeping size and mtime", func(t *testing.T, env string) {
			p := env + "/" + sp + "demo/__init__.py"
			fi, _ := os.Stat(p)
			overwrite(t, p, []byte("VALUE = 43\n"))
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, refusal.EnvDrift, seal.Content, sp + "demo/__init__.py"},
		{"add", func(t *testing.T, env string) {
			writable(t, env+"/"+sp+"demo/x")
			os.WriteFile(env+"/"+sp+"demo/evil.py", []byte("import os\n"), 0o444)
		}, refusal.EnvDrift, seal.Added, sp + "demo/evil.py"},
		{"add a directory", func(t *testing.T, env string) {
			writable(t, env+"/"+sp+"x")
			os.Mkdir(env+"/"+sp+"evil", 0o755)
		}, refusal.EnvDrift, seal.Added, sp + "evil"},
		{"add a .pth file", func(t *testing.T, env string) {
			writable(t, env+"/"+sp+"x")
			os.WriteFile(env+"/"+sp+"evil.pth", []byte("import evil\n"), 0o444)
		}, refusal.EnvDrift, seal.Added, sp + "evil.pth"},
		{"remove", func(t *testing.T, env string) {
			writable(t, env+"/"+sp+"demo/x")
			os.Remove(env + "/" + sp + "demo/cli.py")
		}, refusal.EnvDrift, seal.Removed, sp + "demo/cli.py"},
		{"chmod", func(t *testing.T, env string) {
			os.Chmod(env+"/"+sp+"demo/cli.py", 0o644)
		}, refusal.EnvDrift, seal.Mode, sp + "demo/cli.py"},
		{"chmod a directory", func(t *testing.T, env string) {
			os.Chmod(env+"/"+sp+"demo", 0o777)
		}, refusal.EnvDrift, seal.Mode, sp + "demo"},
		{"file replaced by a symlink", func(t *testing.T, env string) {
			p := env + "/" + sp + "demo/cli.py"
			writable(t, p)
			os.Remove(p)
			os.Symlink("/tmp/evil.py", p)
		}, refusal.EnvDrift, seal.Kind, sp + "demo/cli.py"},
		{"link target", func(t *testing.T, env string) {
			writable(t, env+"/bin/x")
			os.Remove(env + "/bin/python3")
			os.Symlink("/usr/bin/python3", env+"/bin/python3")
		}, refusal.EnvDrift, seal.LinkTarget, "bin/python3"},
		{"seal tampered", func(t *testing.T, env string) {
			b, _ := os.ReadFile(seal.SealPath(env))
			os.Chmod(seal.SealPath(env), 0o644)
			os.WriteFile(seal.SealPath(env), []byte(strings.Replace(string(b), `"version": "1.0"`, `"version": "1.1"`, 1)), 0o644)
		}, refusal.SealInvalid, "", ""},
		{"seal names another digest", func(t *testing.T, env string) {
			os.Rename(seal.SealPath(env), seal.SealPath(env)+".bak")
			os.WriteFile(seal.SealPath(env), []byte(`{"format":"cruxprov.seal/v2"}`), 0o644)
		}, refusal.SealInvalid, "", ""},
		{"seal missing", func(t *testing.T, env string) {
			os.Remove(seal.SealPath(env))
		}, refusal.SealMissing, "", ""},
		{"index tampered", func(t *testing.T, env string) {
			b, _ := os.ReadFile(seal.StatIndexPath(env))
			b[len(b)-1] ^= 1
			os.Chmod(seal.StatIndexPath(env), 0o644)
			os.WriteFile(seal.StatIndexPath(env), b, 0o644)
		}, refusal.SealInvalid, "", ""},
		{"index missing", func(t *testing.T, env string) {
			os.Remove(seal.StatIndexPath(env))
		}, refusal.SealInvalid, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := sealedDemo(t)
			c.mutate(t, env)
			restoreDirs()
			for _, deep := range []bool{false, true} {
				rep, err := seal.Verify(context.Background(), env, seal.Options{Deep: deep})
				if !errors.Is(err, c.code) {
					t.Fatalf("deep=%v: got %v, want %s", deep, err, c.code)
				}
				if c.change != "" {
					d := rep.Differences[0]
					if d.Change != c.change || d.Path != c.path {
						t.Errorf("deep=%v: first difference %+v, want %s at %s", deep, d, c.change, c.path)
					}
				}
			}
		})
	}
}

func TestVerifyAcceptsStatOnlyChanges(t *testing.T) {
	env := sealedDemo(t)
	p := env + "/lib/python3.11/site-packages/demo/cli.py"
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil { // touch: same bytes
		t.Fatal(err)
	}
	rep, err := seal.Verify(context.Background(), env, seal.Options{})
	if err != nil {
		t.Fatalf("a touched but unchanged file is not drift: %v", err)
	}
	if rep.Rehashed != 1 {
		t.Errorf("rehashed %d files, want exactly the touched one", rep.Rehashed)
	}
}

func TestVerifyExplainCollectsEverything(t *testing.T) {
	env := sealedDemo(t)
	sp := env + "/lib/python3.11/site-packages/"
	overwrite(t, sp+"demo/__init__.py", []byte("changed\n"))
	os.Chmod(sp+"demo/cli.py", 0o600)
	os.Chmod(sp+"demo", 0o755)
	os.Remove(sp + "demo/tool.sh")
	os.WriteFile(sp+"demo/new.py", nil, 0o444)
	rep, err := seal.Verify(context.Background(), env, seal.Options{Explain: true})
	if !errors.Is(err, refusal.EnvDrift) {
		t.Fatal(err)
	}
	got := map[seal.Change]bool{}
	for _, d := range rep.Differences {
		got[d.Change] = true
	}
	for _, c := range []seal.Change{seal.Content, seal.Mode, seal.Removed, seal.Added} {
		if !got[c] {
			t.Errorf("explain lacks %s: %+v", c, rep.Differences)
		}
	}
	if len(rep.Differences) != 5 { // content, cli.py mode, demo/ mode, removed, added
		t.Errorf("%d differences: %+v", len(rep.Differences), rep.Differences)
	}
}

// TestVerifyInterpreterSwap builds an env on a copy of Debian's python3.11
// and then replaces the copy's bytes.
func TestVerifyInterpreterSwap(t *testing.T) {
	const debian = "/usr/bin/python3.11"
	if _, err := os.Stat(debian); err != nil {
		t.Skip("no Debian python3.11")
	}
	dir := t.TempDir()
	py := filepath.Join(dir, "python3.11")
	copyFile(t, debian, py, 0o755)
	ctx := context.Background()
	in, err := ProbeInterpreter(ctx, py)
	if err != nil {
		t.Fatal(err)
	}
	if in.Path != py {
		t.Fatalf("probe says %s, want the copy %s", in.Path, py)
	}
	p, err := platform.Host(ctx, py)
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.Platform, req.Interpreter = p, in
	res, err := Create(ctx, st, req)
	if err != nil {
		t.Fatal(err)
	}
	// Another interpreter of the same platform id makes another env.
	if other := request(t, w); other.Platform.ID() == p.ID() {
		r2, err := Create(ctx, st, other)
		if err != nil || r2.Digest == res.Digest {
			t.Fatalf("two interpreters, one env digest: %v", err)
		}
	}
	if _, err := seal.Verify(ctx, res.Dir, seal.Options{}); err != nil {
		t.Fatal(err)
	}
	// Same size, other bytes: replace the copy with a patched one.
	b, _ := os.ReadFile(py)
	b[len(b)-1] ^= 0xff
	os.Remove(py)
	os.WriteFile(py, b, 0o755)
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
			if _, err := seal.Verify(ctx, res.Dir, seal.Options{Deep: deep}); !errors.Is(err, refusal.InterpreterDrift) {
				t.Fatalf("deep=%v: %v", deep, err)
			}
		})
	}
	os.Remove(py)
	if _, err := seal.Verify(ctx, res.Dir, seal.Options{}); !errors.Is(err, refusal.InterpreterDrift) {
		t.Fatalf("interpreter removed: %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

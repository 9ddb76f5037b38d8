package materialize

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/store"
)

// TestCopiedEnvNamesItsSealedPath: a created env's seal records its final
// path (envs/<hex> of the store, not the staging directory it was built
// in), which its console scripts name. A copy of the env, its
// seal and its index into another home (`cp -a`) is intact byte for byte,
// yet its scripts name the original: fast and deep verify refuse it
// env_drift, naming where it was sealed.
func TestCopiedEnvNamesItsSealedPath(t *testing.T) {
	env := sealedDemo(t)
	s, err := seal.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Env.Location != env {
		t.Fatalf("env.location %q, want the env's path %s", s.Env.Location, env)
	}
	// (A long path's shebang is a /bin/sh trampoline that names it.)
	if b, err := os.ReadFile(filepath.Join(env, "bin", "demo-cli")); err != nil || !strings.Contains(string(b), env+"/bin/python") {
		t.Fatalf("demo-cli does not name %s/bin/python: %q %v", env, b, err)
	}
	dest := filepath.Join(testdir.New(t), "other-home", "envs")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", env, seal.SealPath(env), seal.StatIndexPath(env), dest).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	cp := filepath.Join(dest, filepath.Base(env))
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
			rep, err := seal.Verify(context.Background(), cp, seal.Options{Deep: deep})
			if !errors.Is(err, refusal.EnvDrift) || len(rep.Differences) == 0 || rep.Differences[0].Change != seal.Location || !strings.Contains(err.Error(), env) {
				t.Fatalf("a copy at %s: %v (%v), want env_drift naming %s", cp, err, rep.Differences, env)
			}
		})
	}
}

// TestCreateRebuildsACopiedEnv: a store copied to another path holds its
// envs sealed at the old one. Create there of the same inputs (an install
// proposing the pin again in the copy) met the copied env as env_drift,
// advising to replace it, then to run the create again: one command more
// than needed. An env whose only difference is its location is now built
// again for its new path, under its digest (Result.SealedAt names where it
// was sealed, and a warning says so); one that differs in anything else
// too is refused as before, for its owner to find out what changed it.
func TestCreateRebuildsACopiedEnv(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	orig, err := Create(ctx, st, req)
	if err != nil {
		t.Fatal(err)
	}
	copyStore := func(name string) *store.Store {
		t.Helper()
		home := filepath.Join(testdir.New(t), name)
		if out, err := exec.Command("cp", "-a", st.Home(), home).CombinedOutput(); err != nil {
			t.Fatalf("cp -a: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = removeTree(home) })
		cp, err := store.Open(home)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}

	cp := copyStore("copied")
	var warned []string
	req.Warn = func(s string) { warned = append(warned, s) }
	res, err := Create(ctx, cp, req)
	if err != nil {
		t.Fatalf("Create in the copy: %v", err)
	}
	want := filepath.Join(cp.Home(), EnvsDir, filepath.Base(orig.Dir))
	if res.Dir != want || res.Reused || res.SealedAt != orig.Dir || res.Digest != orig.Digest {
		t.Errorf("Create in the copy: %+v; want %s built again, sealed at %s before", res, want, orig.Dir)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "sealed at "+orig.Dir) {
		t.Errorf("warnings %q; want one naming where it was sealed", warned)
	}
	if _, err := seal.Verify(ctx, res.Dir, seal.Options{Deep: true}); err != nil {
		t.Errorf("the env built again: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(res.Dir, "bin", "demo-cli")); err != nil || !strings.Contains(string(b), res.Dir+"/bin/python") {
		t.Errorf("demo-cli does not name %s/bin/python: %q %v", res.Dir, b, err)
	}
	if again, err := Create(ctx, cp, req); err != nil || !again.Reused || again.SealedAt != "" {
		t.Errorf("Create again: %+v, %v; want it reused", again, err)
	}

	// Copied, and changed: refused as drifted, not built over.
	cp = copyStore("changed")
	env := filepath.Join(cp.Home(), EnvsDir, filepath.Base(orig.Dir))
	var f string
	filepath.WalkDir(env, func(p string, d os.DirEntry, err error) error {
		if err == nil && f == "" && d.Type().IsRegular() && strings.HasSuffix(p, ".py") {
			f = p
		}
		return nil
	})
	if f == "" {
		t.Fatal("no .py file in the env")
	}
	overwrite(t, f, []byte("# changed\n"))
	if _, err := Create(ctx, cp, req); !errors.Is(err, refusal.EnvDrift) {
		t.Errorf("Create over a copied env changed since: %v; want env_drift", err)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "# changed\n" {
		t.Errorf("the changed env was built over: %q %v", b, err)
	}
}

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

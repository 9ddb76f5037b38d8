package invoke_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/seal"
)

// TestNoBytecodeEnvStaysSealed: an env made without bytecode
// (--no-compile) is run with python -B and PYTHONDONTWRITEBYTECODE=1, so
// that the interpreter, and a Python subprocess the provider starts,
// compile the env's modules in memory and write nothing into the sealed
// env. A run as root (which the env's 0555 directories do not stop) wrote
// __pycache__ directories there, and the next call's verify refused
// env_drift: every call after the first. An env with bytecode is run as
// before (python -I -m, nothing added).
func TestNoBytecodeEnvStaysSealed(t *testing.T) {
	fixture(t) // skips where the fixture env cannot be built
	ctx := context.Background()
	f, err := invoketest.BuildLocalWith(ctx, invoketest.TempDir(t), python, invoketest.LocalOptions{NoCompile: true})
	if err != nil {
		t.Fatal(err)
	}
	ex := &invoke.Subprocess{WorkdirParent: t.TempDir()}
	secrets := map[string]string{"acme/alpha": "a", "acme/beta": "b"}
	probe := func(f invoketest.Fixtures) (cmdline string, environ map[string]string) {
		t.Helper()
		res, err := ex.Run(ctx, f.Call("probe", nil, secrets))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != invoke.StatusOK {
			t.Fatalf("%s %+v", res.Status, res.Error)
		}
		var v struct {
			Cmdline string            `json:"cmdline"`
			Environ map[string]string `json:"environ"`
		}
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(v.Cmdline, "\x00", " "), v.Environ
	}
	for i := range 2 { // the second call's Verify hook refused the first's pycs
		cmdline, environ := probe(f)
		if !strings.Contains(cmdline, " -I -B -m cruxible_provider_runtime.harness") || environ["PYTHONDONTWRITEBYTECODE"] != "1" {
			t.Errorf("call %d: %q, PYTHONDONTWRITEBYTECODE=%q; want python -I -B -m and 1", i+1, cmdline, environ["PYTHONDONTWRITEBYTECODE"])
		}
	}
	filepath.WalkDir(f.Env, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "__pycache__" {
			t.Errorf("the run wrote %s into the sealed env", p)
		}
		return nil
	})
	if _, err := seal.Verify(ctx, f.Env, seal.Options{Deep: true}); err != nil {
		t.Errorf("the env after the runs: %v", err)
	}

	cmdline, environ := probe(fixture(t))
	if !strings.Contains(cmdline, " -I -m cruxible_provider_runtime.harness") {
		t.Errorf("an env with bytecode: %q, want python -I -m", cmdline)
	}
	if v, ok := environ["PYTHONDONTWRITEBYTECODE"]; ok {
		t.Errorf("an env with bytecode: PYTHONDONTWRITEBYTECODE=%q set", v)
	}
}

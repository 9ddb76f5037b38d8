package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/registry"
)

// TestNoBytecodeFromTheDigest: whether an env was made without bytecode
// is read from the pin's materialization digest, which covers it, not
// guessed from the tree (an env whose __pycache__ directories were lost
// was still made with bytecode, and its rebuild without would be another
// env; one made without and given a __pycache__ since was not); a digest
// these inputs do not give is advised as the default, with bytecode.
func TestNoBytecodeFromTheDigest(t *testing.T) {
	spec := &registry.Provider{Name: "acme-echo", Package: &registry.Package{Name: "acme-echo", Version: "1.0.0", SHA256: digest.Sum([]byte("wheel"))}}
	res := digest.Sum([]byte("resolution"))
	interp := digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.2"}
	root := &digest.Root{Name: "acme-echo", Version: "1.0.0", SHA256: spec.Package.SHA256}
	bare := t.TempDir() // no __pycache__: the tree alone would say no bytecode
	compiled := t.TempDir()
	if err := os.MkdirAll(filepath.Join(compiled, "lib", "__pycache__"), 0o755); err != nil {
		t.Fatal(err)
	}
	label := registry.InterpreterLabel(interp.Path, interp.Version, digest.Sum([]byte("python")))
	for _, c := range []struct {
		name     string
		bytecode string
		dir      string
		want     bool
	}{
		{"compiled, its __pycache__ gone", digest.BytecodeUncheckedHash, bare, false},
		{"made without bytecode, a __pycache__ written since", "", compiled, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := digest.LocalMaterializationDigest("cp311-manylinux_2_36_x86_64", interp, res, root, c.bytecode)
			if err != nil {
				t.Fatal(err)
			}
			m := registry.Materialization{Backend: "local", Platform: "cp311-manylinux_2_36_x86_64", Digest: d, Resolution: res, Path: c.dir, Interpreter: label}
			if got := noBytecode(spec, m); got != c.want {
				t.Errorf("noBytecode = %v, want %v", got, c.want)
			}
		})
	}
	// A digest these inputs do not give: the default.
	m := registry.Materialization{Platform: "cp311-manylinux_2_36_x86_64", Digest: digest.Sum([]byte("other")), Resolution: res, Path: bare, Interpreter: label}
	if noBytecode(spec, m) {
		t.Error("a digest the inputs do not give: want the default, with bytecode")
	}
}

// TestProposeNoBytecode: the propose advice says --no-compile for a pin
// whose envs were all made without bytecode, and not for one with
// bytecode, with envs of both, or with none.
func TestProposeNoBytecode(t *testing.T) {
	spec := &registry.Provider{Name: "acme-echo", Package: &registry.Package{Name: "acme-echo", Version: "1.0.0", SHA256: digest.Sum([]byte("wheel"))}}
	res := digest.Sum([]byte("resolution"))
	interp := digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.2"}
	root := &digest.Root{Name: "acme-echo", Version: "1.0.0", SHA256: spec.Package.SHA256}
	label := registry.InterpreterLabel(interp.Path, interp.Version, digest.Sum([]byte("python")))
	env := func(platform, bytecode string) registry.Materialization {
		d, err := digest.LocalMaterializationDigest(platform, interp, res, root, bytecode)
		if err != nil {
			t.Fatal(err)
		}
		return registry.Materialization{Backend: registry.BackendLocal, Platform: platform, Digest: d, Resolution: res, Interpreter: label}
	}
	const a, b = "cp311-manylinux_2_36_x86_64", "cp311-manylinux_2_17_x86_64"
	for _, c := range []struct {
		name string
		ms   []registry.Materialization
		want bool
	}{
		{"without bytecode", []registry.Materialization{env(a, ""), env(b, "")}, true},
		{"with bytecode", []registry.Materialization{env(a, digest.BytecodeUncheckedHash)}, false},
		{"both", []registry.Materialization{env(a, ""), env(b, digest.BytecodeUncheckedHash)}, false},
		{"no env", nil, false},
	} {
		s := *spec
		s.Materializations = c.ms
		if got := s.ProposeNoBytecode(); got != c.want {
			t.Errorf("%s: ProposeNoBytecode = %v, want %v", c.name, got, c.want)
		}
	}
}

package install

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/store"
)

// python is the interpreter the install tests install for: Debian's,
// which the fixtures' host platform is.
const python = "/usr/bin/python3.11"

// rig is what an install test starts from: the fixture providers served
// as an index from a fresh directory, a store in it, and a stub registry
// that knows no interface yet.
type rig struct {
	dir    string
	fx     *fixtures.Set
	st     *store.Store
	reg    *registry.Stub
	client *index.Client
}

// newRig skips where python is not, and builds the rig.
func newRig(t *testing.T) *rig {
	t.Helper()
	needPython(t)
	r := &rig{dir: testdir.New(t), reg: registry.NewStub()}
	var url string
	r.fx, url = fixtureindex.Serve(t, r.dir)
	r.st = openStore(t, r.dir)
	var err error
	if r.client, err = index.New(url, index.Options{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// registerInterfaces registers every fixture interface's schema in the
// stub, as an operator does before installing, and returns their
// interface digests (DESIGN §5) by id.
func (r *rig) registerInterfaces(t *testing.T) map[string]digest.Digest {
	t.Helper()
	schemas := map[string]digest.Digest{}
	for id, in := range r.fx.Interfaces {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.reg.RegisterInterface(context.Background(), id, b); err != nil {
			t.Fatal(err)
		}
		if schemas[id], err = digest.InterfaceDigest(b); err != nil {
			t.Fatal(err)
		}
	}
	return schemas
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
}

// openStore opens (makes) the store at dir/store.
func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

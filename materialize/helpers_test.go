package materialize

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/wheel"
)

// realPython is the real interpreter the tests build envs on (python3 on
// PATH is a pyenv shim here; the env links to the real binary either way):
// pyenv's 3.11 where it exists, else Debian's.
var realPython = firstExisting("/root/.pyenv/versions/3.11.7/bin/python3.11", "/usr/bin/python3.11")

func firstExisting(paths ...string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return paths[0]
}

var (
	hostOnce sync.Once
	hostPlat *platform.Platform
	hostIn   *Probe
	hostErr  error
)

// host returns the platform and interpreter of realPython, probed once.
func host(t testing.TB) (*platform.Platform, *Probe) {
	t.Helper()
	if _, err := os.Stat(realPython); err != nil {
		t.Skipf("no %s here", realPython)
	}
	hostOnce.Do(func() {
		ctx := context.Background()
		hostPlat, hostErr = platform.Host(ctx, realPython)
		if hostErr == nil {
			hostIn, hostErr = ProbeInterpreter(ctx, realPython)
		}
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostPlat, hostIn
}

// files is a wheel's content: member name → data; a name ending in "*"
// is written executable (the "*" is dropped).
type files map[string]string

// putWheel stores a wheel's bytes and returns its resolved form.
func putWheel(t testing.TB, st *store.Store, filename string, b []byte) lockfile.ResolvedWheel {
	t.Helper()
	fn, err := wheel.ParseFilename(filename)
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Sum(b)
	if err := st.Put(context.Background(), d, int64(len(b)), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	return lockfile.ResolvedWheel{Name: fn.Name, Version: fn.Version, Filename: filename, Size: int64(len(b)), SHA256: d}
}

// newStore opens a store in a fresh temp dir.
func newStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(st.Home()) })
	return st
}

// request is a host request over wheels.
func request(t testing.TB, ws ...lockfile.ResolvedWheel) Request {
	p, in := host(t)
	res := lockfile.Resolution{Platform: p.ID(), Packages: ws}
	res.Sort()
	return Request{Platform: p, Interpreter: in, Resolution: res, NoCompile: true}
}

// runPython runs the env's python with args and returns its output.
func runPython(t testing.TB, env string, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(env, "bin", "python"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s/bin/python %v: %v\n%s", env, args, err, out)
	}
	return string(out)
}

// execOut runs a program of the env and returns its combined output.
func execOut(prog, env string) (string, error) {
	out, err := exec.Command(prog).CombinedOutput()
	return string(out), err
}

func digestOf(s string) digest.Digest { return digest.Sum([]byte(s)) }

// putDemo stores the demo wheel (create_test.go's demoWheel, every install
// rule) and returns its resolved form.
func putDemo(t testing.TB, st *store.Store) lockfile.ResolvedWheel {
	t.Helper()
	return putWheel(t, st, "demo-1.0-py3-none-any.whl", wheeltest.Build(t, "demo-1.0-py3-none-any.whl", demoWheel))
}

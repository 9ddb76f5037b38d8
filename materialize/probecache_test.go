package materialize

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// TestProbeCacheRemembersIdentity: the interpreter's identity (its sha256)
// is hashed once and remembered while the executable keeps its stat; a
// changed stat (here its mtime) makes the next create hash it again.
func TestProbeCacheRemembersIdentity(t *testing.T) {
	const debian = "/usr/bin/python3.11"
	if _, err := os.Stat(debian); err != nil {
		t.Skip("needs Debian's python3.11 (a statically linked interpreter that runs from a copy)")
	}
	dir := t.TempDir()
	py := filepath.Join(dir, "python3.11")
	copyFile(t, debian, py, 0o755)
	c := ProbeCache{Dir: filepath.Join(dir, "cache")}
	in, err := c.Interpreter(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.identity(in); ok {
		t.Fatal("an identity before any was taken")
	}
	id, err := interpreterIdentity(in)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.identity(in)
	if !ok || got.SHA256 != id.SHA256 || got.Path != py || got.MtimeNS != id.MtimeNS {
		t.Fatalf("remembered %+v (%v), want %+v", got, ok, id)
	}
	// A second probe through the cache carries it too.
	in2, err := c.Interpreter(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := in2.cache.identity(in2); !ok || got.SHA256 != id.SHA256 {
		t.Fatal("not remembered for the next probe")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(py, later, later); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.identity(in); ok {
		t.Fatal("remembered across a stat change")
	}
	id2, err := interpreterIdentity(in)
	if err != nil {
		t.Fatal(err)
	}
	if id2.MtimeNS == id.MtimeNS || id2.SHA256 != id.SHA256 {
		t.Fatalf("after the change: %+v", id2)
	}
	// A zero cache remembers nothing and still identifies.
	in.cache = ProbeCache{}
	if id3, err := interpreterIdentity(in); err != nil || id3.SHA256 != id.SHA256 {
		t.Fatalf("uncached identity: %v", err)
	}
}

// TestProbeInterruptedIsNotARefusal: a probe killed because ctx was
// cancelled does not blame --python.
func TestProbeInterruptedIsNotARefusal(t *testing.T) {
	slow := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := ProbeInterpreter(ctx, slow)
	if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
		t.Errorf("ProbeInterpreter: %v (code %q)", err, refusal.CodeOf(err))
	}
	_, err = ProbeCache{Dir: t.TempDir()}.Interpreter(ctx, slow)
	if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
		t.Errorf("ProbeCache.Interpreter: %v (code %q)", err, refusal.CodeOf(err))
	}
	// A broken interpreter is still refused.
	if _, err := ProbeInterpreter(context.Background(), "/bin/false"); !errors.Is(err, refusal.MaterializeFailed) {
		t.Errorf("/bin/false: %v", err)
	}
}

// TestProbeBareName: an interpreter named by a bare name (install's
// default --python python3) is the one on PATH, by its real path. The
// probe runs with an environment of its own, without PATH, where a
// CPython started as "python3" cannot find itself and reports
// sys.executable as "" (realpath: the working directory, which the
// platform probe then tried to run); Debian's /usr/bin/python3 does.
func TestProbeBareName(t *testing.T) {
	want, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	in, err := ProbeInterpreter(context.Background(), "python3")
	if err != nil {
		t.Fatal(err)
	}
	if in.Path != want {
		t.Errorf("python3 probed as %q, want %q", in.Path, want)
	}
	if _, err := ProbeInterpreter(context.Background(), "no-such-python-here"); refusal.CodeOf(err) != refusal.MaterializeFailed {
		t.Errorf("a name not on PATH: %v", err)
	}
}

package materialize

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// TestQAInterruptedCreateIsNotARefusal: a create cancelled while it
// installs returns an error wrapping context.Canceled with no refusal
// code (it is not materialize_failed), and leaves no staging.
func TestQAInterruptedCreateIsNotARefusal(t *testing.T) {
	st := newStore(t)
	good := putDemo(t, st)
	for _, stage := range []string{"install", "wheel", "compile", "seal"} {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := request(t, good)
			req.NoCompile = stage != "compile"
			req.Events = func(e Event) {
				if e.Stage == stage {
					cancel()
				}
			}
			_, err := Create(ctx, st, req)
			if !errors.Is(err, context.Canceled) || refusal.CodeOf(err) != "" {
				t.Fatalf("cancelled at %s: %v (code %q)", stage, err, refusal.CodeOf(err))
			}
			if ents, _ := os.ReadDir(filepath.Join(st.Home(), "tmp")); len(ents) != 0 {
				t.Errorf("staging left: %v", ents)
			}
		})
	}
}

// TestQAInterruptedProbeIsNotARefusal: a probe killed because ctx was
// cancelled does not blame --python.
func TestQAInterruptedProbeIsNotARefusal(t *testing.T) {
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

// TestQACompileProcsCapped: --jobs bounds installs as given, but the
// Python compile processes are at most the CPUs and the sources.
func TestQACompileProcsCapped(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct{ jobs, n, want int }{
		{1000, 100000, cpus},
		{1, 100, 1},
		{0, 100, 1},
		{1000, 1, 1},
		{cpus, 3, min(cpus, 3)},
	} {
		if got := compileProcs(tc.jobs, tc.n); got != tc.want {
			t.Errorf("compileProcs(%d, %d) = %d, want %d", tc.jobs, tc.n, got, tc.want)
		}
	}
}

// TestQATreeDigestDependsOnHome holds what docs/seal.md says: the same
// request in two stores has one materialization digest (the identity
// across homes) but two tree digests (the env's absolute path is in
// pyvenv.cfg, script shebangs and bytecode co_filename).
func TestQATreeDigestDependsOnHome(t *testing.T) {
	var got []*Result
	for range 2 {
		st := newStore(t)
		w := putDemo(t, st)
		req := request(t, w)
		req.NoCompile = false
		r, err := Create(context.Background(), st, req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if got[0].Digest != got[1].Digest {
		t.Errorf("materialization digests differ across homes: %s, %s", got[0].Digest, got[1].Digest)
	}
	if got[0].TreeDigest == got[1].TreeDigest {
		t.Errorf("tree digests equal across homes (%s): docs/seal.md says they depend on the home", got[0].TreeDigest)
	}
}

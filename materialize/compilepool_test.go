package materialize

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/refusal"
)

// A compile process that dies, answers garbage, answers too much or hangs
// past a cancellation fails the pool with a refusal naming what it said
// (or ctx's error), without hanging, and nothing is left running.
func TestCompilePoolFailures(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, script, want string
		cancel             bool
	}{
		{"dies", "echo boom >&2; exit 3", "boom", false},
		{"malformed", `printf 'Q\000\000\000\000'; cat >/dev/null`, "malformed", false},
		{"short", `head -c 5 >/dev/null; printf 'P\010\000\000\000ab'`, "short", false},
		{"more", `head -c 5 >/dev/null; printf 'N\000\000\000\000N\000\000\000\000N\000\000\000\000'`, "more than it was asked", false},
		{"cancelled", "exec sleep 30", "", true},
		// Killed from outside (the out-of-memory killer, kill -9): not
		// the compiling that failed, so not --no-compile's advice.
		{"killed", "head -c 5 >/dev/null; kill -KILL $$", "was killed while it compiled", false},
		{"terminated", "kill -TERM $$", "was killed while it compiled", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			py := filepath.Join(dir, tc.name)
			if err := os.WriteFile(py, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := newCompilePool(ctx, py, "bin/python", dir, 2)
			srcs := []pycSource{{rel: "a.py", size: 1}, {rel: "b.py", size: 1}}
			p.submit('c', dir, "/final", srcs, func([]pycSource, []compiled) error { return nil })
			if tc.cancel {
				time.AfterFunc(100*time.Millisecond, cancel)
			}
			start := time.Now()
			_, err := p.wait()
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if tc.cancel {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
				return
			}
			if !errors.Is(err, refusal.MaterializeFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want materialize_failed mentioning %q", err, tc.want)
			}
			killed := strings.Contains(tc.want, "killed")
			if rem := refusal.RemedyOf(err); (rem == nil) != killed || rem != nil && rem.Action != refusal.ActionNoBytecode {
				t.Errorf("remedy %+v (killed from outside: %v)", rem, killed)
			}
		})
	}
}

// A callback's error stops the pool and is the one returned; batches a
// callback submits are compiled before wait returns.
func TestCompilePoolCallbacks(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "python")
	// Answers "N" to every pair of every batch.
	script := `import sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    h = inp.read(5)
    if len(h) < 5:
        break
    a = inp.read(int.from_bytes(h[1:], "little")).split(b"\0")
    for _ in zip(a[0::2], a[1::2]):
        out.write(b"N" + bytes(4))
    out.flush()
`
	if err := os.WriteFile(py, []byte("#!/bin/sh\nexec "+realPython+" -c '"+script+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var srcs []pycSource
	for i := range 500 {
		srcs = append(srcs, pycSource{rel: "m" + strings.Repeat("x", i%7) + ".py", size: 4 << 10})
	}
	p := newCompilePool(context.Background(), py, "bin/python", dir, 2)
	answered, again := 0, 0
	var mu = make(chan struct{}, 1)
	p.submit('c', dir, "/final", srcs, func(src []pycSource, res []compiled) error {
		mu <- struct{}{}
		defer func() { <-mu }()
		answered += len(res)
		if again == 0 {
			again++
			p.submit('d', dir, "/final", src[:1], func(_ []pycSource, res []compiled) error {
				mu <- struct{}{}
				defer func() { <-mu }()
				again += len(res)
				return nil
			})
		}
		return nil
	})
	if _, err := p.wait(); err != nil {
		t.Fatal(err)
	}
	if answered != len(srcs) || again != 2 {
		t.Fatalf("answered %d of %d, resubmitted %d of 1", answered, len(srcs), again-1)
	}

	// Started before any batch: the processes wait for batches, and
	// exit at wait when none came.
	for _, n := range []int{len(srcs), 0} {
		p = newCompilePool(context.Background(), py, "bin/python", dir, 2)
		p.start()
		got := 0
		p.submit('c', dir, "/final", srcs[:n], func(_ []pycSource, res []compiled) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			got += len(res)
			return nil
		})
		if _, err := p.wait(); err != nil || got != n || p.started != 2 {
			t.Fatalf("started early, %d sources: %v, %d answered, %d processes", n, err, got, p.started)
		}
	}

	p = newCompilePool(context.Background(), py, "bin/python", dir, 2)
	boom := errors.New("boom")
	p.submit('c', dir, "/final", srcs, func([]pycSource, []compiled) error { return boom })
	if _, err := p.wait(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the callback's", err)
	}
}

// TestCompileProcsCapped: --jobs bounds installs as given, but the
// Python compile processes are at most the CPUs and the sources.
func TestCompileProcsCapped(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct{ jobs, n, want int }{
		{1000, 100000, cpus},
		{1, 100, 1},
		{0, 100, 1},
		{1000, 1, 1},
		{cpus, 3, min(cpus, 3)},
	} {
		t.Run(fmt.Sprintf("jobs=%d,n=%d", tc.jobs, tc.n), func(t *testing.T) {
			if got := compileProcs(tc.jobs, tc.n); got != tc.want {
				t.Errorf("compileProcs(%d, %d) = %d, want %d", tc.jobs, tc.n, got, tc.want)
			}
		})
	}
}

// The compile processes run with compileTunables unless the request says
// PlainMalloc: the pool hands them that environment, glibc takes the
// tunables (its heap is marked for huge pages), and the env's bytes are
// the same either way.
func TestCompileTunables(t *testing.T) {
	t.Run("environment", func(t *testing.T) {
		dir := t.TempDir()
		py := filepath.Join(dir, "python")
		if err := os.WriteFile(py, []byte("#!/bin/sh\nenv > \"$0.env\"\nexit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, tuned := range []bool{true, false} {
			p := newCompilePool(context.Background(), py, "bin/python", dir, 1)
			if !tuned {
				p.env = compileEnv(false)
			}
			p.submit('c', dir, "/final", []pycSource{{rel: "a.py", size: 1}}, func([]pycSource, []compiled) error { return nil })
			if _, err := p.wait(); err == nil {
				t.Fatal("the fake compiler's exit 3 was not an error")
			}
			env, err := os.ReadFile(py + ".env")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Contains("\n"+string(env), "\nGLIBC_TUNABLES="+compileTunables+"\n")
			if got != tuned || !strings.Contains("\n"+string(env), "\nPYTHONHASHSEED=0\n") {
				t.Errorf("tuned=%v: the compile process's environment:\n%s", tuned, env)
			}
		}
	})
	t.Run("glibc", func(t *testing.T) {
		mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if err != nil || strings.Contains(string(mode), "[never]") {
			t.Skipf("transparent huge pages are off here (%q, %v)", mode, err)
		}
		// The [heap] mapping's flags, after growing it.
		const script = `import os, sys
v = os.confstr("CS_GNU_LIBC_VERSION") or ""
if not v.startswith("glibc ") or tuple(map(int, v.split()[1].split(".")[:2])) < (2, 35):
    print("old", v); sys.exit()
x = [bytes(200) for _ in range(100000)]
heap = False
for line in open("/proc/self/smaps"):
    f = line.split()
    if "-" in f[0] and not f[0].endswith(":"):
        heap = f[-1] == "[heap]"
    elif heap and f[0] == "VmFlags:":
        print("hg" if "hg" in f[1:] else "none")
        break
`
		for _, tuned := range []bool{true, false} {
			cmd := exec.Command(realPython, "-S", "-c", script)
			cmd.Env = compileEnv(tuned)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := strings.TrimSpace(string(out))
			if strings.HasPrefix(got, "old") {
				t.Skipf("%s: glibc.malloc.hugetlb needs glibc 2.35", got)
			}
			if want := map[bool]string{true: "hg", false: "none"}[tuned]; got != want {
				t.Errorf("tuned=%v: the compile process's heap has %q, want %q", tuned, got, want)
			}
		}
	})
	t.Run("same bytes", func(t *testing.T) {
		_, in := host(t)
		st := newStore(t)
		w := putWheel(t, st, "pycdemo-1.0-py3-none-any.whl", wheeltest.Build(t, "pycdemo-1.0-py3-none-any.whl", pycWheel(in.CacheTag)))
		var trees []string
		for _, plain := range []bool{false, true} {
			// One env path (the pycs record it): the second replaces the first.
			req := request(t, w)
			req.NoCompile, req.NoCache, req.PlainMalloc, req.Replace = false, true, plain, plain
			res, err := Create(context.Background(), st, req)
			if err != nil {
				t.Fatal(err)
			}
			checkPycs(t, res.Dir, in.CacheTag)
			trees = append(trees, res.TreeDigest.String())
		}
		if trees[0] != trees[1] {
			t.Errorf("tree digests differ: tuned %s, plain %s", trees[0], trees[1])
		}
	})
}

package watch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/invoke/invoketest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/watch"
)

// python is the interpreter the fixture envs are built on: a copy of it,
// so that a test may change the interpreter an env depends on.
const python = "/usr/bin/python3.11"

func TestMain(m *testing.M) {
	switch os.Getenv("CRUXPROV_WATCH_CHILD") {
	case "limit":
		os.Exit(limitChild("max_inotify_watches"))
	case "instances":
		os.Exit(limitChild("max_inotify_instances"))
	case "nobody":
		os.Exit(nobodyChild())
	}
	os.Exit(m.Run())
}

// env builds a fresh sealed env of the hostile fixture provider on its own
// copy of python, readable by every user.
func env(t testing.TB) (invoketest.Fixtures, string) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s here", python)
	}
	base, err := os.MkdirTemp("", "cruxprov-watch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(base) })
	os.Chmod(base, 0o755)
	py := filepath.Join(base, "python", "bin", "python3.11")
	if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, python, py, 0o755)
	f, err := invoketest.BuildLocal(context.Background(), base, py)
	if err != nil {
		t.Fatal(err)
	}
	return f, py
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func removeTree(dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// counted is seal.Verify of env, counting its calls.
func counted(env string, n *atomic.Int64) func(context.Context) error {
	return func(ctx context.Context) error {
		n.Add(1)
		_, err := seal.Verify(ctx, env, seal.Options{})
		return err
	}
}

// sitePackages returns the env's site-packages directory.
// quiet is a Verifier of spec around a counted full verify of env, and
// its count, after three checks of the unchanged env made one full
// verify (closed with t).
func quiet(t *testing.T, spec watch.Spec, env string) (*watch.Verifier, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	v := watch.NewVerifier(spec, counted(env, n))
	t.Cleanup(func() { v.Close() })
	for i := 0; i < 3; i++ {
		if err := v.Verify(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 1 || v.WatchErr() != nil {
		t.Fatalf("%d full verifies for 3 checks of an unchanged env (want 1); watch error %v", n.Load(), v.WatchErr())
	}
	return v, n
}

func sitePackages(t testing.TB, env string) string {
	t.Helper()
	s, err := seal.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(env, filepath.FromSlash(s.Env.SitePackages))
}

// anyFile returns a .py file of the env's site-packages.
func anyFile(t testing.TB, env string) string {
	t.Helper()
	sp := sitePackages(t, env)
	var found string
	filepath.WalkDir(sp, func(p string, d os.DirEntry, err error) error {
		if err == nil && found == "" && d.Type().IsRegular() && strings.HasSuffix(p, ".py") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatal("no .py file in the env")
	}
	return found
}

// TestEachChangeMakesAFullVerify: after a full verify that passed, checks
// cost nothing until a change; each change makes the next check a full
// verify, which refuses when the change is drift, and the Verifier stays
// dirty while it refuses.
func TestEachChangeMakesAFullVerify(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the changes are made as root (the env is read-only)")
	}
	cases := []struct {
		name   string
		change func(t *testing.T, env, py, registry string)
		code   refusal.Code // "": the full verify passes
	}{
		{"a file edited", func(t *testing.T, env, _, _ string) {
			f, err := os.OpenFile(anyFile(t, env), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("# edited\n")
			f.Close()
		}, refusal.EnvDrift},
		{"a file chmod", func(t *testing.T, env, _, _ string) {
			if err := os.Chmod(anyFile(t, env), 0o644); err != nil {
				t.Fatal(err)
			}
		}, refusal.EnvDrift},
		{"a new file in a subdirectory", func(t *testing.T, env, _, _ string) {
			if err := os.WriteFile(filepath.Join(filepath.Dir(anyFile(t, env)), "planted.py"), nil, 0o444); err != nil {
				t.Fatal(err)
			}
		}, refusal.EnvDrift},
		{"a new directory, then a file in it", func(t *testing.T, env, _, _ string) {
			d := filepath.Join(sitePackages(t, env), "planted")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(d, "x.py"), nil, 0o444)
		}, refusal.EnvDrift},
		{"the seal renamed away", func(t *testing.T, env, _, _ string) {
			if err := os.Rename(seal.SealPath(env), seal.SealPath(env)+".old"); err != nil {
				t.Fatal(err)
			}
		}, refusal.SealMissing},
		{"the seal renamed away and back", func(t *testing.T, env, _, _ string) {
			os.Rename(seal.SealPath(env), seal.SealPath(env)+".old")
			if err := os.Rename(seal.SealPath(env)+".old", seal.SealPath(env)); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a copy of the seal moved over it", func(t *testing.T, env, _, _ string) {
			b, _ := os.ReadFile(seal.SealPath(env))
			tmp := filepath.Join(filepath.Dir(env), "tmp.json")
			os.WriteFile(tmp, append(b[:len(b):len(b)], ' '), 0o444)
			if err := os.Rename(tmp, seal.SealPath(env)); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"another seal moved over it", func(t *testing.T, env, _, _ string) {
			tmp := filepath.Join(filepath.Dir(env), "tmp.json")
			os.WriteFile(tmp, []byte(`{"format":"cruxprov.seal/v2"}`), 0o444)
			if err := os.Rename(tmp, seal.SealPath(env)); err != nil {
				t.Fatal(err)
			}
		}, refusal.SealInvalid},
		{"the stat index touched", func(t *testing.T, env, _, _ string) {
			now := time.Now()
			if err := os.Chtimes(seal.StatIndexPath(env), now, now); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"the interpreter copy touched", func(t *testing.T, _, py, _ string) {
			now := time.Now()
			if err := os.Chtimes(py, now, now); err != nil {
				t.Fatal(err)
			}
		}, ""}, // a touch alone: the full verify rehashes it and passes
		{"the interpreter copy written", func(t *testing.T, _, py, _ string) {
			f, err := os.OpenFile(py, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0})
			f.Close()
		}, refusal.InterpreterDrift},
		{"the interpreter copy replaced by rename", func(t *testing.T, _, py, _ string) {
			copyFile(t, python, py+".new", 0o755)
			if err := os.Rename(py+".new", py); err != nil {
				t.Fatal(err)
			}
		}, ""}, // same bytes: a new inode, rehashed, passes
		{"the env's root chmod", func(t *testing.T, env, _, _ string) {
			if err := os.Chmod(env, 0o755); err != nil {
				t.Fatal(err)
			}
		}, refusal.EnvDrift},
		{"the store renamed, a tampered copy in its place", func(t *testing.T, env, _, _ string) {
			// No watched inode changes: the store (an ancestor of envs/)
			// is renamed, and a copy made at its path.
			store := filepath.Dir(filepath.Dir(env))
			if err := os.Rename(store, store+".old"); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("cp", "-a", store+".old", store).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v: %s", err, out)
			}
			t.Cleanup(func() { removeTree(store + ".old") })
			if err := os.Chmod(anyFile(t, env), 0o644); err != nil {
				t.Fatal(err)
			}
		}, refusal.EnvDrift},
		{"a file in the registry directory", func(t *testing.T, _, _, reg string) {
			if err := os.WriteFile(filepath.Join(reg, "pins", "p.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, py := env(t)
			reg := t.TempDir()
			os.Mkdir(filepath.Join(reg, "pins"), 0o755)
			v, n := quiet(t, watch.Spec{Env: f.Env, Extra: []string{reg}}, f.Env)
			ctx := context.Background()
			tc.change(t, f.Env, py, reg)
			err := v.Verify(ctx)
			if n.Load() != 2 {
				t.Fatalf("the check after the change made %d full verifies in all, want 2", n.Load())
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("full verify after a harmless change: %v", err)
				}
				if err := v.Verify(ctx); err != nil || n.Load() != 2 {
					t.Fatalf("after a passing full verify: %v, %d full verifies (want clean again)", err, n.Load())
				}
				return
			}
			if !errors.Is(err, tc.code) {
				t.Fatalf("Verify = %v, want %s", err, tc.code)
			}
			if err := v.Verify(ctx); !errors.Is(err, tc.code) || n.Load() != 3 {
				t.Fatalf("the next check: %v after %d full verifies; want %s from a third", err, n.Load(), tc.code)
			}
		})
	}
}

// TestQuietWhileRunning: running the provider (python reading the env)
// and unrelated activity in envs/ and in the interpreter's directory make
// no full verify.
func TestQuietWhileRunning(t *testing.T) {
	f, py := env(t)
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: f.Env}, counted(f.Env, &n))
	defer v.Close()
	ex := &invoke.Subprocess{WorkdirParent: t.TempDir()}
	for i := 0; i < 3; i++ {
		c := f.Call("probe", nil, map[string]string{"acme/alpha": "a", "acme/beta": "b"})
		c.Verify = v.Verify
		res, err := ex.Run(context.Background(), c)
		if err != nil || res.Status != invoke.StatusOK {
			t.Fatalf("run %d: %+v %v", i, res, err)
		}
	}
	// Another env's files appear beside this one, a file beside the
	// interpreter changes.
	envs := filepath.Dir(f.Env)
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(envs, fmt.Sprintf("other%02d.seal.json", i)), nil, 0o644)
	}
	os.WriteFile(filepath.Join(filepath.Dir(py), "python3.11-config"), nil, 0o755)
	if err := v.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Errorf("%d full verifies, want 1", n.Load())
	}
}

// TestOverflow: a queue overflow makes the next check a full verify even
// when the events lost were unrelated. The queue's size is fixed when an
// inotify instance is made, from fs.inotify.max_queued_events: the test
// lowers it for the instant of the first check and restores it.
func TestOverflow(t *testing.T) {
	const knob = "/proc/sys/fs/inotify/max_queued_events"
	f, _ := env(t)
	old, err := os.ReadFile(knob)
	if err != nil || os.Geteuid() != 0 {
		t.Skipf("needs root to set %s", knob)
	}
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: f.Env}, counted(f.Env, &n))
	defer v.Close()
	if err := os.WriteFile(knob, []byte("16"), 0); err != nil {
		t.Skipf("cannot set %s: %v", knob, err)
	}
	err = v.Verify(context.Background())
	if rerr := os.WriteFile(knob, old, 0); rerr != nil {
		t.Fatalf("cannot restore %s to %s: %v", knob, old, rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	envs := filepath.Dir(f.Env)
	for i := 0; i < 100; i++ { // unrelated names: only the overflow counts
		os.WriteFile(filepath.Join(envs, fmt.Sprintf("other%03d", i)), nil, 0o644)
	}
	if err := v.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d full verifies after an overflow, want 2", n.Load())
	}
	if err := v.Verify(context.Background()); err != nil || n.Load() != 2 {
		t.Fatalf("after re-arming with the default queue: %v, %d full verifies", err, n.Load())
	}
}

// TestUnwatchable: when a watch cannot be placed, every check is a full
// verify and WatchErr says why.
func TestUnwatchable(t *testing.T) {
	f, _ := env(t)
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: f.Env, Extra: []string{filepath.Join(t.TempDir(), "no-registry")}}, counted(f.Env, &n))
	defer v.Close()
	for i := 1; i <= 3; i++ {
		if err := v.Verify(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n.Load() != int64(i) {
			t.Fatalf("check %d: %d full verifies", i, n.Load())
		}
	}
	if v.WatchErr() == nil {
		t.Error("no WatchErr")
	}
}

// TestWatchLimit: with the inotify watch limit reached (a user namespace
// whose max_inotify_watches is 5: the host's limit is not touched), every
// check is a full verify and WatchErr names the limit.
func TestWatchLimit(t *testing.T) {
	testLimit(t, "limit", "max_user_watches")
}

// TestInstanceLimit: with the inotify instance limit reached (each
// Verifier holds one; a user namespace whose max_inotify_instances is 0),
// every check is a full verify and WatchErr names that limit. It said
// "too many open files" before, which sent one to raise ulimit -n, to no
// effect.
func TestInstanceLimit(t *testing.T) {
	testLimit(t, "instances", "max_user_instances")
}

func testLimit(t *testing.T, mode, knob string) {
	f, _ := env(t)
	out, err := child(t, mode, f.Env, &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	})
	if err != nil {
		if strings.Contains(out, "skip:") || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			t.Skipf("no user namespace here: %v %s", err, out)
		}
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "ok 3 full verifies") || !strings.Contains(out, knob) {
		t.Fatalf("child: %s", out)
	}
}

// limitChild sets the user namespace's knob (5 watches, or no instance at
// all) and checks three times.
func limitChild(knob string) int {
	env := os.Getenv("CRUXPROV_WATCH_ENV")
	val := "5"
	if knob == "max_inotify_instances" {
		val = "0"
	}
	if err := os.WriteFile("/proc/sys/user/"+knob, []byte(val), 0); err != nil {
		fmt.Println("skip:", err)
		return 1
	}
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: env}, func(context.Context) error { n.Add(1); return nil })
	for i := 0; i < 3; i++ {
		if err := v.Verify(context.Background()); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Printf("ok %d full verifies: %v\n", n.Load(), v.WatchErr())
	return 0
}

// TestAsUnprivilegedExecutor: uid 65534, which can only read the store,
// watches and verifies an env (and the interpreter) it does not own, and
// a change root makes is seen.
func TestAsUnprivilegedExecutor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to uid 65534")
	}
	f, _ := env(t)
	out, err := child(t, "nobody", f.Env, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "ok uid 65534: 1 full verify, then env_drift from 2") {
		t.Fatalf("child: %s", out)
	}
}

func nobodyChild() int {
	env := os.Getenv("CRUXPROV_WATCH_ENV")
	ctx := context.Background()
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: env}, counted(env, &n))
	for i := 0; i < 3; i++ {
		if err := v.Verify(ctx); err != nil || v.WatchErr() != nil {
			fmt.Println(err, v.WatchErr())
			return 1
		}
	}
	if err := os.WriteFile(filepath.Join(env, "planted"), nil, 0o644); err == nil {
		fmt.Println("uid 65534 could write into the env")
		return 1
	}
	// The parent (root) changes the env, then signals on stdin.
	fmt.Println("ready")
	io.ReadAll(os.Stdin)
	err := v.Verify(ctx)
	fmt.Printf("ok uid %d: 1 full verify, then %s from %d\n", os.Getuid(), refusal.CodeOf(err), n.Load())
	return 0
}

// lockedBuffer is a child's output, read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child runs this test binary as mode with attr; for "nobody" the parent
// plants a file in the env once the child is ready.
func child(t *testing.T, mode, env string, attr *syscall.SysProcAttr) (string, error) {
	t.Helper()
	bin := asuser.CopySelf(t, asuser.Dir(t, "cruxprov-watch-bin-"))
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{"CRUXPROV_WATCH_CHILD=" + mode, "CRUXPROV_WATCH_ENV=" + env, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = attr
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	if mode == "nobody" {
		for i := 0; i < 200 && !strings.Contains(out.String(), "ready"); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		os.WriteFile(filepath.Join(sitePackages(t, env), "planted.py"), nil, 0o444)
	}
	in.Close()
	err = cmd.Wait()
	return out.String(), err
}

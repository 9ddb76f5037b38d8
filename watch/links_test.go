package watch_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/watch"
)

// TestSymlinkedSealRefused: the env's seal replaced by a symlink to a copy
// elsewhere. The full verify refuses it (seal_invalid), as it refuses a
// symlinked stat index: the seal is the regular file beside the env, the
// one the Verifier watches. It read the seal through the link, passed,
// and the Verifier, watching the link itself, missed every later change
// to the file it named.
func TestSymlinkedSealRefused(t *testing.T) {
	f, _ := env(t)
	path := seal.SealPath(f.Env)
	var n atomic.Int64
	v := watch.NewVerifier(watch.Spec{Env: f.Env}, counted(f.Env, &n))
	defer v.Close()
	ctx := context.Background()
	if err := v.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), filepath.Base(path))
	copyFile(t, path, elsewhere, 0o644)
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ctx); !errors.Is(err, refusal.SealInvalid) {
		t.Fatalf("the seal a symlink: %v, want seal_invalid", err)
	}
	if _, err := seal.Load(f.Env); !errors.Is(err, refusal.SealInvalid) {
		t.Fatalf("seal.Load: %v, want seal_invalid", err)
	}
}

// TestExtraSymlinkedSubdirectory: Spec.Extra is the registry
// directory, "a directory with all its subdirectories"; a subdirectory that
// is a symlink to a directory (registry/pins on another volume, say;
// registry.OpenDir accepts it, os.Stat follows it) is watched
// through the link: a pin written there atomically (temp file and rename,
// as registry.writeAtomic does) makes a full verify. tree() did not follow
// symlinks, and it made none.
func TestExtraSymlinkedSubdirectory(t *testing.T) {
	f, _ := env(t)
	reg := t.TempDir()
	pinsReal := t.TempDir()
	if err := os.Symlink(pinsReal, filepath.Join(reg, "pins")); err != nil {
		t.Fatal(err)
	}
	v, n := quiet(t, watch.Spec{Env: f.Env, Extra: []string{reg}}, f.Env)
	ctx := context.Background()
	// An approved change-set writes pins/acme.json (temp + rename).
	tmp := filepath.Join(reg, "pins", ".acme.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{"revision":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(reg, "pins", "acme.json")); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("a new pin written in registry/pins (a symlinked directory) made no full verify: %d full verifies in all, want 2", n.Load())
	}
}

// TestRelativeSymlinkDotDot: follow() resolves a relative symlink
// target lexically (filepath.Join + Clean), the kernel and seal.Verify
// (filepath.EvalSymlinks) physically. With Spec.Env a symlink whose target
// is "x/../envs/<hex>" and x itself a symlink, the two differ: the
// Verifier watches the lexical path (links/envs/<hex>, a copy there) while
// the full verify, the pin's stat and the run use the physical one
// (store/envs/<hex>), which nothing watches. Every later change to the env
// that runs passes.
func TestRelativeSymlinkDotDot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the changes are made as root")
	}
	f, _ := env(t)
	store := filepath.Dir(filepath.Dir(f.Env))
	base := filepath.Dir(store)
	hex := filepath.Base(f.Env)
	links := filepath.Join(base, "links")
	if err := os.Mkdir(links, 0o755); err != nil {
		t.Fatal(err)
	}
	// x -> store/envs, so x/.. is store (physically), links (lexically).
	if err := os.Symlink(filepath.Join(store, "envs"), filepath.Join(links, "x")); err != nil {
		t.Fatal(err)
	}
	// A copy of envs/ where the lexical reading of the link lands.
	if out, err := exec.Command("cp", "-a", filepath.Join(store, "envs"), filepath.Join(links, "envs")).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	link := filepath.Join(links, "current")
	if err := os.Symlink("x/../envs/"+hex, link); err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(link); real != f.Env {
		t.Fatalf("the link resolves to %s, want %s", real, f.Env)
	}
	v, n := quiet(t, watch.Spec{Env: link}, link)
	ctx := context.Background()
	// The env the link leads to (and that runs) is changed.
	victim := anyFile(t, f.Env)
	if err := os.Chmod(victim, 0o666); err != nil {
		t.Fatal(err)
	}
	_, full := seal.Verify(ctx, link, seal.Options{})
	if !errors.Is(full, refusal.EnvDrift) {
		t.Fatalf("full verify: %v", full)
	}
	if err := v.Verify(ctx); err == nil {
		t.Fatalf("%s chmod 0666: full verify %s, the Verifier nil after %d full verify", victim, refusal.CodeOf(full), n.Load())
	}
}

// TestPathRepointedWhileArming: arm resolves the env's path (follow: watches on
// the directories it resolves to) and only afterwards records the file the
// path resolves to (pin: one stat). A symlink above the env (the store's
// home, "cur" -> storeA | storeB, as a blue/green switch does) re-pointed
// between the two leaves the watches on storeA's env while the pin, the
// full verify and every later check's stat see storeB's: the Verifier is
// clean, and every later change to the env that actually runs (storeB's)
// raises no event on anything watched and passes the stat. The flip of the
// symlink itself raises no event (its directory is not watched; the pin is
// what should catch it).
func TestPathRepointedWhileArming(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the changes are made as root")
	}
	f, _ := env(t)
	storeA := filepath.Dir(filepath.Dir(f.Env))
	base := filepath.Dir(storeA)
	hex := filepath.Base(f.Env)
	storeB := filepath.Join(base, "storeB")
	if out, err := exec.Command("cp", "-a", storeA, storeB).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	cur := filepath.Join(base, "cur")
	point := func(to string) {
		tmp := cur + ".tmp"
		os.Remove(tmp)
		if err := os.Symlink(to, tmp); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, cur); err != nil {
			t.Error(err)
		}
	}
	point(storeA)
	envPath := filepath.Join(cur, "envs", hex) // what the Verifier and the verify use
	ctx := context.Background()

	deadline := time.Now().Add(8 * time.Second) // the old code lost within 3 s
	for i := 0; time.Now().Before(deadline); i++ {
		var n atomic.Int64
		// A real full verify of the path (seal.Verify follows cur).
		v := watch.NewVerifier(watch.Spec{Env: envPath}, counted(envPath, &n))
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				if k%2 == 0 {
					point(storeB)
				} else {
					point(storeA)
				}
			}
		}()
		err := v.Verify(ctx)
		stop.Store(true)
		wg.Wait()
		if err != nil {
			v.Close()
			continue
		}
		// Quiet now. Is the Verifier clean?
		if err := v.Verify(ctx); err != nil || n.Load() != 1 {
			v.Close()
			continue
		}
		// Clean. Change the env that runs now (cur's target): chmod one of
		// its files.
		target, _ := os.Readlink(cur)
		victim := anyFile(t, filepath.Join(target, "envs", hex))
		st, _ := os.Stat(victim)
		if err := os.Chmod(victim, 0o666); err != nil {
			t.Fatal(err)
		}
		_, full := seal.Verify(ctx, envPath, seal.Options{})
		got := v.Verify(ctx)
		fulls := n.Load()
		v.Close()
		os.Chmod(victim, st.Mode().Perm())
		if full == nil {
			t.Fatalf("the full verify passes a chmod 0666 of %s", victim)
		}
		if got == nil {
			t.Fatalf("after %d tries: cur -> %s; %s chmod 0666: full verify %v; the Verifier returned nil after %d full verify (none for the change)",
				i+1, filepath.Base(target), victim, full, fulls)
		}
	}
}

package imagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// entryFiles are what fakeBuild writes, a base entry's file set in
// small: an OCI layout's files, each written with a pause between.
var entryFiles = []string{"oci/oci-layout", "oci/blobs/sha256/layer", "oci/blobs/sha256/config", "oci/index.json"}

var fakeDigest = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}

// fakeBuild stands in for mmdebstrap and the layout's writing: slow
// enough that builds overlap.
func fakeBuild(n *atomic.Int32) func(string) (v1.Hash, error) {
	return func(tmp string) (v1.Hash, error) {
		n.Add(1)
		for _, f := range entryFiles {
			p := filepath.Join(tmp, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return v1.Hash{}, err
			}
			if err := os.WriteFile(p, []byte(f), 0o600); err != nil {
				return v1.Hash{}, err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fakeDigest, nil
	}
}

// complete reports what is wrong with the entry dir, "" when it is
// whole: every file of fakeBuild's, readable by every user, and its
// digest.
func complete(dir string) string {
	for _, f := range entryFiles {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return err.Error()
		}
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != f || st.Mode().Perm()&0o044 != 0o044 {
			return fmt.Sprintf("%s: %q %v", f, b, st.Mode())
		}
	}
	if h, ok := readEntry(dir); !ok || h != fakeDigest {
		return "no digest"
	}
	return ""
}

// watch reads dir until stop is closed: whenever its digest file is
// there the entry must be whole (the digest file is the commit marker).
func watch(t *testing.T, dir string, stop chan struct{}, done *sync.WaitGroup) {
	done.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := os.Stat(filepath.Join(dir, "digest")); err == nil {
				if why := complete(dir); why != "" {
					t.Errorf("a reader saw the digest of an entry not whole: %s", why)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// TestCachedConcurrent: builds of the base cache entry at once (go test
// ./... runs several packages' test binaries together, each wanting the
// base) each get the whole entry, and no reader sees half of one. They
// built into the entry's directory itself, one removing it while the
// other wrote, which left a corrupt base (an empty layer beside the real
// one) that failed every test on it. With the lock one builds, the
// others wait for it; without it (a lock file that cannot be opened)
// each builds privately and the losers of the rename take the winner's.
func TestCachedConcurrent(t *testing.T) {
	for _, locked := range []bool{true, false} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "cruxprov-test-base-x")
			if !locked {
				// A lock file that cannot be opened or made.
				if err := os.Symlink(filepath.Join(parent, "missing", "lock"), dir+".lock"); err != nil {
					t.Fatal(err)
				}
			}
			var builds atomic.Int32
			stop, readers := make(chan struct{}), &sync.WaitGroup{}
			watch(t, dir, stop, readers)
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					h, err := cached(dir, fakeBuild(&builds))
					if err != nil || h != fakeDigest {
						t.Errorf("cached: %v %v", h, err)
					}
					if why := complete(dir); why != "" {
						t.Errorf("the entry returned is not whole: %s", why)
					}
				})
			}
			wg.Wait()
			close(stop)
			readers.Wait()
			if n := builds.Load(); locked && n != 1 {
				t.Errorf("built %d times, want once (the others wait for it)", n)
			}
			ents, _ := os.ReadDir(parent)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if want := []string{"cruxprov-test-base-x", "cruxprov-test-base-x.lock"}; strings.Join(names, " ") != strings.Join(want, " ") {
				t.Errorf("left in the cache's directory: %v, want %v", names, want)
			}
		})
	}
}

// TestCachedProcesses: two test processes at once (as go test ./...
// runs them) build the entry once between them, and each reads it whole.
func TestCachedProcesses(t *testing.T) {
	if dir := os.Getenv("CRUXPROV_IMAGETEST_CACHED"); dir != "" {
		var builds atomic.Int32
		h, err := cached(dir, fakeBuild(&builds))
		if err != nil || h != fakeDigest {
			t.Fatalf("cached: %v %v", h, err)
		}
		if why := complete(dir); why != "" {
			t.Fatalf("not whole: %s", why)
		}
		fmt.Printf("builds=%d\n", builds.Load())
		return
	}
	dir := filepath.Join(t.TempDir(), "cruxprov-test-base-x")
	stop, readers := make(chan struct{}), &sync.WaitGroup{}
	watch(t, dir, stop, readers)
	cmds := make([]*exec.Cmd, 3)
	outs := make([]strings.Builder, len(cmds))
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestCachedProcesses$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "CRUXPROV_IMAGETEST_CACHED="+dir)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	built := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i].String())
		}
		built += strings.Count(outs[i].String(), "builds=1")
	}
	close(stop)
	readers.Wait()
	if built != 1 {
		t.Errorf("%d processes built the entry, want 1", built)
	}
}

// TestCachedReplacesHalfEntry: an entry without its digest (a build of
// old, interrupted, in place) is built again and replaced.
func TestCachedReplacesHalfEntry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cruxprov-test-base-x")
	os.MkdirAll(filepath.Join(dir, "oci"), 0o755)
	os.WriteFile(filepath.Join(dir, "oci", "index.json"), []byte("{"), 0o644)
	var builds atomic.Int32
	if h, err := cached(dir, fakeBuild(&builds)); err != nil || h != fakeDigest {
		t.Fatalf("cached: %v %v", h, err)
	}
	if why := complete(dir); why != "" {
		t.Fatal(why)
	}
	if h, err := cached(dir, func(string) (v1.Hash, error) { t.Fatal("built again"); return v1.Hash{}, nil }); err != nil || h != fakeDigest {
		t.Fatalf("cached again: %v %v", h, err)
	}
}

// TestCachedHeldLock: a process that holds the entry's lock and never
// ends (a hung build) holds another no longer than lockWait: it says it
// waits, once, then builds the entry itself. It waited for ever, without
// a word, until go test's -timeout killed it.
func TestCachedHeldLock(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "cruxprov-test-base-x")
	held := lockFile(dir + ".lock") // another open file: flock holds it against this process too
	if held == nil {
		t.Fatal("cannot lock")
	}
	defer held.Close()
	wait, said := lockWait, say
	defer func() { lockWait, say = wait, said }()
	var mu sync.Mutex
	var lines []string
	lockWait = 300 * time.Millisecond
	say = func(s string) { mu.Lock(); lines = append(lines, s); mu.Unlock() }
	var builds atomic.Int32
	done := make(chan error, 1)
	go func() {
		h, err := cached(dir, fakeBuild(&builds))
		if err == nil && h != fakeDigest {
			err = fmt.Errorf("digest %v", h)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cached waits for a held lock past lockWait")
	}
	if why := complete(dir); why != "" || builds.Load() != 1 {
		t.Errorf("the entry built past the wait: %s, %d builds", why, builds.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || !strings.Contains(lines[0], "waiting for the test base image another test process is building") ||
		!strings.Contains(lines[0], "Ctrl-C stops waiting") || !strings.Contains(lines[1], "gave up waiting") {
		t.Errorf("said %q", lines)
	}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/asuser"
)

// TestIngestMemfdBounded: a root wheel copied into a memfd (a store this
// user cannot write, and no temp directory it can) stops at half of the
// memory free when it began, counting the memory cgroup's limit (an
// executor in a container sees the host's MemAvailable and is killed at
// its cgroup's limit), with a *WriteError saying what to do; before, it
// grew without bound, and in a container until the OOM killer ended the
// process. A child process in a real memory cgroup of 128 MiB reads an
// endless body into Ingest.
func TestIngestMemfdBounded(t *testing.T) {
	if cg := os.Getenv("CRUXPROV_TEST_MEMCG"); cg != "" {
		ingestInCgroup(t, cg)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("making a memory cgroup and a read-only store needs root")
	}
	cg, procs := memoryCgroup(t, 128<<20)
	home := filepath.Join(smallDisk(t, "1m"), "home")
	if _, err := Open(home); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", filepath.Dir(home)).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only: %v %s", err, out)
	}
	asuser.RunChild(t, t.Name(), "CRUXPROV_TEST_MEMCG="+procs, "CRUXPROV_TEST_HOME="+home,
		"CRUXPROV_TEST_CACHEDIR="+t.TempDir(), "CRUXPROV_TEST_TMPFS="+smallDisk(t, "1g"),
		"TMPDIR="+filepath.Join(t.TempDir(), "missing"))
	if b, err := os.ReadFile(filepath.Join(cg, "memory.failcnt")); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Logf("the cgroup met its limit %s times (reclaim), and the child lived", strings.TrimSpace(string(b)))
	}
}

// ingestInCgroup is the child's half: it joins the cgroup (its
// cgroup.procs file) and ingests an endless body.
func ingestInCgroup(t *testing.T, procs string) {
	if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(os.Getenv("CRUXPROV_TEST_HOME"))
	if err != nil {
		t.Fatal(err)
	}
	// The cgroup's usage full of page cache, as a long-lived container's
	// is (a file of 1.5 times the limit written and read back): the
	// kernel frees it for the copy, which counts it as room. Counted as
	// used, the room was ~0 and a wheel of 16 MiB was refused.
	cache := filepath.Join(os.Getenv("CRUXPROV_TEST_CACHEDIR"), "cache")
	chunk := make([]byte, 1<<20)
	f, err := os.Create(cache)
	if err != nil {
		t.Fatal(err)
	}
	for range 192 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f, err = os.Open(cache); err != nil {
		t.Fatal(err)
	}
	_, err = io.CopyBuffer(io.Discard, f, chunk) // not into memory: the cache alone
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r := cgroupRoom(); r < 32<<20 {
		t.Errorf("the cgroup's room with its usage page cache: %d bytes, want most of its 128 MiB", r)
	}
	p, err := s.Ingest(context.Background(), io.LimitReader(&endless{}, 16<<20))
	if err != nil {
		t.Fatalf("a 16 MiB copy into a memfd, the cgroup full of page cache: %v", err)
	}
	p.Discard()
	src := &endless{}
	_, err = s.Ingest(context.Background(), io.LimitReader(src, 1<<30)) // a gigabyte: the copy should stop long before
	var we *WriteError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "memfd") || !strings.Contains(err.Error(), "set TMPDIR") {
		t.Fatalf("an endless copy into a memfd: %v, want a *WriteError saying to set TMPDIR", err)
	}
	if src.n > 128<<20 {
		t.Errorf("the copy took %d bytes before it stopped, in a cgroup of 128 MiB", src.n)
	}
	// A TMPDIR on a tmpfs (a container's /tmp) whose size says 1 GiB: its
	// pages are the cgroup's memory too, and bound the copy likewise
	// (bounded by the tmpfs's size alone, it was killed).
	os.Setenv("TMPDIR", os.Getenv("CRUXPROV_TEST_TMPFS"))
	src = &endless{}
	_, err = s.Ingest(context.Background(), io.LimitReader(src, 1<<30))
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "free space there, or set TMPDIR") || src.n > 128<<20 {
		t.Fatalf("an endless copy into a tmpfs TMPDIR: %v after %d bytes, want a *WriteError within the cgroup's 128 MiB", err, src.n)
	}
}

// memoryCgroup makes a memory cgroup limited to limit bytes (v2 where
// the unified hierarchy is mounted with the memory controller, else v1)
// and returns its directory and its cgroup.procs file; it is removed when
// the test ends. It skips t where neither can be made.
func memoryCgroup(t *testing.T, limit int64) (dir, procs string) {
	t.Helper()
	name := fmt.Sprintf("cruxprov-test-%d", os.Getpid())
	if m := cgroup2Mount(); m != "" {
		if b, _ := os.ReadFile(filepath.Join(m, "cgroup.subtree_control")); strings.Contains(string(b), "memory") {
			dir = filepath.Join(m, name)
			if os.Mkdir(dir, 0o755) == nil {
				t.Cleanup(func() { os.Remove(dir) })
				if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
					t.Skipf("cannot limit a cgroup v2: %v", err)
				}
				return dir, filepath.Join(dir, "cgroup.procs")
			}
		}
	}
	dir = filepath.Join("/sys/fs/cgroup/memory", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup here: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit a cgroup v1: %v", err)
	}
	return dir, filepath.Join(dir, "cgroup.procs")
}

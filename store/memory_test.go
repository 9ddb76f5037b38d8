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
	"golang.org/x/sys/unix"
)

// TestMemAvailableSeesAMemfd: what memAvailable reads falls as a memfd
// grows (the kernel counts its pages as memory in use), so the half rule
// bounds a memfd copy as it bounds one on a disk.
func TestMemAvailableSeesAMemfd(t *testing.T) {
	before := memAvailable()
	if before <= 0 {
		t.Skip("the available memory cannot be read here")
	}
	fd, err := unix.MemfdCreate("cruxprov-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("no memfd: %v", err)
	}
	f := os.NewFile(uintptr(fd), "memfd")
	defer f.Close()
	const size = 256 << 20
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for range size / len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Others on the machine allocate and free meanwhile: a fall of at
	// least half the memfd's size is the kernel counting it.
	if after := memAvailable(); before-after < size/2 {
		t.Errorf("available memory %d before a %d-byte memfd, %d with it", before, size, after)
	}
}

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
	src := &endless{}
	_, err = s.Ingest(context.Background(), io.LimitReader(src, 1<<30)) // a gigabyte: the copy should stop long before
	var we *WriteError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "memfd") || !strings.Contains(err.Error(), "set TMPDIR") {
		t.Fatalf("an endless copy into a memfd: %v, want a *WriteError saying to set TMPDIR", err)
	}
	if src.n > 128<<20 {
		t.Errorf("the copy took %d bytes before it stopped, in a cgroup of 128 MiB", src.n)
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

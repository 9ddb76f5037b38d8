package store

import (
	"os"
	"path"
	"strings"
	"testing"
)

// Seeds are this VM's (Linux 6.1, cgroups v1 with the unified hierarchy
// beside it) /proc and cgroup files, with a v2-only host's lines.
func realFile(f *testing.F, name string) {
	if b, err := os.ReadFile(name); err == nil {
		f.Add(b)
	}
}

// FuzzMeminfoAvailable: whatever /proc/meminfo holds, the amount taken
// from it is -1 or bytes no sum of them overflows.
func FuzzMeminfoAvailable(f *testing.F) {
	realFile(f, "/proc/meminfo")
	for _, s := range []string{"MemTotal:       16318000 kB\nMemFree:         1234567 kB\nMemAvailable:    9349992 kB\n", "MemAvailable: 9223372036854775807 kB\n", "MemAvailable: -5 kB\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := meminfoAvailable(b); n < -1 || n >= maxMem {
			t.Fatalf("%q: %d", b, n)
		}
	})
}

// FuzzMemoryCgroups: whatever /proc/self/cgroup holds, each cgroup read
// is an absolute clean path inside the hierarchy (no "..": a path outside
// this namespace's root is not one to read).
func FuzzMemoryCgroups(f *testing.F) {
	realFile(f, "/proc/self/cgroup")
	for _, s := range []string{"9:name=systemd:/\n4:memory:/process_api/f3eff2f2fa65bc27daf6e188f5012255\n0::/\n", "0::/user.slice/user-1001.slice/session-3.scope\n", "0::/../../x\n", "4:cpu,memory:a:b\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, cg := range memoryCgroups(b) {
			if !strings.HasPrefix(cg.path, "/") || path.Clean(cg.path) != cg.path || strings.Contains(cg.path, "..") {
				t.Fatalf("%q: %+v", b, cg)
			}
		}
	})
}

// FuzzCgroupRoom: whatever a cgroup's limit, usage and memory.stat say,
// its room is at least 0 and at most the limit plus its file cache, and
// a limit past maxMem (v1's "unlimited") is none.
func FuzzCgroupRoom(f *testing.F) {
	realFile(f, "/sys/fs/cgroup/memory/memory.stat")
	f.Add([]byte("anon 1234\nfile 5678\nactive_file 4096\ninactive_file 8192\n"))
	f.Add([]byte("total_active_file 9223372036854775807\ntotal_inactive_file 9223372036854775807\n"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		for _, prefix := range []string{"", "total_"} {
			fc := fileCache(stat, prefix)
			if fc < 0 || fc > maxMem {
				t.Fatalf("%q: cache %d", stat, fc)
			}
			for _, lu := range [][2]int64{{128 << 20, 100 << 20}, {1 << 20, 1 << 40}, {9223372036854771712, 0}, {-1, 0}, {maxMem - 1, -maxMem}} {
				r, ok := roomOf(lu[0], lu[1], fc)
				if ok && (r < 0 || r > lu[0]+fc) {
					t.Fatalf("%v + %d: room %d", lu, fc, r)
				}
				if ok && lu[0] >= maxMem {
					t.Fatalf("an unlimited cgroup has room %d", r)
				}
			}
		}
	})
}

// TestRoomOfOverflow: amounts no cgroup holds (a negative usage, a cache
// past 2^62) are no room, not an overflow into a huge or negative one.
func TestRoomOfOverflow(t *testing.T) {
	if r, ok := roomOf(maxMem-1, -maxMem, 0); ok {
		t.Errorf("negative usage: room %d", r)
	}
	if fc := fileCache([]byte("active_file 9223372036854775807\ninactive_file 9223372036854775807\n"), ""); fc != 0 {
		t.Errorf("cache %d", fc)
	}
	if n := meminfoAvailable([]byte("MemAvailable: 9223372036854775807 kB\n")); n != -1 {
		t.Errorf("MemAvailable of 2^63 kB: %d", n)
	}
}

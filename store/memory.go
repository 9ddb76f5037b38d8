package store

import (
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memAvailable is what this process may still put in memory without
// swapping or meeting a limit: the kernel's MemAvailable, or less where a
// memory cgroup this process is in, or one above it, is nearer its limit
// (cgroup v2: memory.max less memory.current; v1: memory.limit_in_bytes
// less memory.usage_in_bytes; each plus the file cache memory.stat counts,
// which the kernel frees first). An executor in a container sees the
// host's MemAvailable but is killed at its cgroup's limit. -1 when
// neither can be read.
func memAvailable() int64 {
	avail := int64(-1)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					avail = kb << 10
				}
			}
		}
	}
	if c := cgroupRoom(); c >= 0 && (avail < 0 || c < avail) {
		avail = c
	}
	return avail
}

// cgroupRoom is the least room (limit less usage) of the memory cgroups
// this process is in and their ancestors, -1 when none is limited or
// none can be read.
func cgroupRoom() int64 {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return -1
	}
	room := int64(-1)
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		// The usage counts the page cache, which the kernel frees before
		// it fails an allocation: the files' pages (active and inactive;
		// a memfd's are shmem, never among them) are room too.
		var mount, limit, usage, statPrefix string
		switch {
		case parts[0] == "0" && parts[1] == "":
			mount, limit, usage = cgroup2Mount(), "memory.max", "memory.current"
		case hasController(parts[1], "memory"):
			mount, limit, usage, statPrefix = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_"
		default:
			continue
		}
		if mount == "" || strings.Contains(parts[2], "..") {
			continue // a cgroup outside this namespace's root: not one to read
		}
		for p := path.Clean("/" + parts[2]); ; p = path.Dir(p) {
			dir := path.Join(mount, p)
			lim, lok := readInt(path.Join(dir, limit))
			use, uok := readInt(path.Join(dir, usage))
			if lok && uok && lim < 1<<62 { // v1 says "unlimited" with a huge number
				r := max(lim-use+fileCache(path.Join(dir, "memory.stat"), statPrefix), 0)
				if room < 0 || r < room {
					room = r
				}
			}
			if p == "/" {
				break
			}
		}
	}
	return room
}

// fileCache is the file pages (active and inactive) memory.stat counts,
// its keys prefixed with prefix (v1's hierarchical "total_"); 0 when it
// cannot be read.
func fileCache(stat, prefix string) int64 {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if ok && (k == prefix+"inactive_file" || k == prefix+"active_file") {
			if x, err := strconv.ParseInt(v, 10, 64); err == nil {
				n += x
			}
		}
	}
	return n
}

// cgroup2Mount is where the unified (v2) hierarchy is mounted: the
// cgroup root itself, or /sys/fs/cgroup/unified beside v1's; "" if
// neither.
func cgroup2Mount() string {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var sfs unix.Statfs_t
		if unix.Statfs(dir, &sfs) == nil && sfs.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir
		}
	}
	return ""
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readInt reads a cgroup file holding one number ("max", unlimited, is
// not one).
func readInt(p string) (int64, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

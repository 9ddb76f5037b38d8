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
		avail = meminfoAvailable(b)
	}
	if c := cgroupRoom(); c >= 0 && (avail < 0 || c < avail) {
		avail = c
	}
	return avail
}

// maxMem bounds every amount these files give: a number past it (v1's
// "unlimited", 2^63 rounded to a page) is no limit, and sums stay below
// int64's overflow.
const maxMem = 1 << 62

// meminfoAvailable is the MemAvailable line of /proc/meminfo in bytes,
// -1 when there is none or it is not a plausible amount.
func meminfoAvailable(b []byte) int64 {
	avail := int64(-1)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil && kb >= 0 && kb < maxMem>>10 {
				avail = kb << 10
			}
		}
	}
	return avail
}

// memCgroup is one memory cgroup a /proc/PID/cgroup line names: on
// the unified hierarchy (v2) or v1's memory controller, its path
// relative to the hierarchy's root (cleaned, absolute).
type memCgroup struct {
	v2   bool
	path string
}

// memoryCgroups reads /proc/self/cgroup: the memory cgroups this process
// is in. A path outside this namespace's root ("/../..") names none to
// read.
func memoryCgroups(b []byte) []memCgroup {
	var out []memCgroup
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var v2 bool
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = true
		case hasController(parts[1], "memory"):
		default:
			continue
		}
		if strings.Contains(parts[2], "..") {
			continue
		}
		out = append(out, memCgroup{v2, path.Clean("/" + parts[2])})
	}
	return out
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
	for _, cg := range memoryCgroups(b) {
		// The usage counts the page cache, which the kernel frees before
		// it fails an allocation: the files' pages (active and inactive;
		// a memfd's are shmem, never among them) are room too.
		mount, limit, usage, statPrefix := "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_"
		if cg.v2 {
			mount, limit, usage, statPrefix = cgroup2Mount(), "memory.max", "memory.current", ""
		}
		if mount == "" {
			continue
		}
		for p := cg.path; ; p = path.Dir(p) {
			dir := path.Join(mount, p)
			lim, lok := readInt(path.Join(dir, limit))
			use, uok := readInt(path.Join(dir, usage))
			if lok && uok {
				var stat []byte
				if b, err := os.ReadFile(path.Join(dir, "memory.stat")); err == nil {
					stat = b
				}
				if r, ok := roomOf(lim, use, fileCache(stat, statPrefix)); ok && (room < 0 || r < room) {
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

// roomOf is a cgroup's room: its limit less its usage, plus the file
// cache the kernel frees first, not below 0; not ok when the limit is
// none (v1 says "unlimited" with a huge number) or an amount is not one.
func roomOf(lim, use, cache int64) (int64, bool) {
	if lim < 0 || lim >= maxMem || use < 0 || use >= maxMem || cache < 0 || cache >= maxMem {
		return 0, false
	}
	return max(lim-use+cache, 0), true
}

// fileCache is the file pages (active and inactive) a memory.stat counts,
// its keys prefixed with prefix (v1's hierarchical "total_"); 0 when
// there are none, at most maxMem.
func fileCache(stat []byte, prefix string) int64 {
	var n int64
	for _, l := range strings.Split(string(stat), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if ok && (k == prefix+"inactive_file" || k == prefix+"active_file") {
			if x, err := strconv.ParseInt(v, 10, 64); err == nil && x >= 0 && x < maxMem {
				n = min(n+x, maxMem)
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
	return parseInt(b)
}

// parseInt reads a cgroup file's one number.
func parseInt(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

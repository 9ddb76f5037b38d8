package main

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestHugeHeap checks that the tree-building commands, and only they, mark
// the start of their heap MADV_HUGEPAGE, and that GODEBUG=disablethp=1
// turns it off.
func TestHugeHeap(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		build bool
	}{
		{[]string{"cruxprov", "--home", "h", "env", "create", "--wheel", "p.whl"}, true},
		{[]string{"cruxprov", "env", "create", "--json", "--offline", "--wheel", "p.whl"}, true},
		{[]string{"cruxprov", "install", "p.whl", "--platform", "host"}, true},
		{[]string{"cruxprov", "image", "build", "--wheel", "p.whl"}, true},
		{[]string{"cruxprov", "verify", "x"}, false},
		{[]string{"cruxprov", "env", "verify", "x"}, false},
		{[]string{"cruxprov", "run", "x"}, false},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			_, path, err := reorder(newApp(io.Discard, io.Discard), tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := buildsTree(path); got != tc.build {
				t.Errorf("buildsTree(%q) = %v, want %v", path, got, tc.build)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		t.Setenv("GODEBUG", "madvdontneed=1,disablethp=1")
		if start := hugeHeap(); start != 0 {
			t.Errorf("with GODEBUG=disablethp=1 it marked %#x", start)
		}
	})
	t.Run("on", func(t *testing.T) {
		mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if err != nil || strings.Contains(string(mode), "[never]") {
			t.Skipf("transparent huge pages are off here (%q, %v): madvise refuses the hint", mode, err)
		}
		t.Setenv("GODEBUG", "")
		start := hugeHeap()
		if start == 0 {
			t.Fatal("hugeHeap marked nothing")
		}
		// The mark outlives the collection that frees the object it was
		// made through: it belongs to the mapping, which the runtime keeps.
		if flags := vmFlags(t, start); !strings.Contains(" "+flags+" ", " hg ") {
			t.Errorf("the heap's mapping at %#x has VmFlags %q, without hg (MADV_HUGEPAGE)", start, flags)
		}
	})
}

// vmFlags returns the VmFlags of the mapping of this process holding addr.
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		// A mapping's first line starts "lo-hi perms …"; its fields
		// ("Size:", "VmFlags:", …) follow it.
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if in && f[0] == "VmFlags:" {
			return strings.Join(f[1:], " ")
		}
	}
	t.Fatalf("no mapping of this process holds %#x", addr)
	return ""
}

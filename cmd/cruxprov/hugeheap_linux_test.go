package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
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
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping of this process holds %#x", addr)
	return ""
}

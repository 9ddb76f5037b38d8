//go:build linux

package invoke

import (
	"os"
	"strconv"
	"testing"
)

// FuzzStatPPid: whatever a /proc/PID/stat line holds (a command name with
// spaces and ")", a truncated read), statPPid returns a pid only when
// field 4 is one, and never panics.
func FuzzStatPPid(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"13651 (cat) R 13532 13532 27194 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 2910761 3133440 382\n",
		"7 (a b) c) S 1 7 7 0 -1\n", "1 (x", "", ")", "1 (x) R -5 0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := statPPid(b)
		if ok && p < 0 {
			t.Fatalf("%q: ppid %d", b, p)
		}
	})
}

func TestStatPPidSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	if p, ok := statPPid(b); !ok || p != os.Getppid() {
		t.Errorf("ppid %d %v, want %d", p, ok, os.Getppid())
	}
	if p, ok := statPPid([]byte("1 (x) R -5 0\n")); ok {
		t.Errorf("ppid %s taken", strconv.Itoa(p))
	}
}

package store

import (
	"os"
	"slices"
	"testing"
)

// The lines of /proc/locks as this kernel prints them: a flock held
// shared and exclusive, a blocked waiter, a POSIX lock, another pid
// namespace's holder (pid 0), and a lock of another file.
const procLocks = `1: FLOCK  ADVISORY  WRITE 807 fe:00:10077025 0 EOF
1: -> FLOCK  ADVISORY  WRITE 990 fe:00:10077025 0 EOF
2: FLOCK  ADVISORY  READ 812 fe:00:10077025 0 EOF
3: FLOCK  ADVISORY  READ 812 fe:00:10077025 0 EOF
4: POSIX  ADVISORY  WRITE 700 fe:00:10077025 0 EOF
5: FLOCK  ADVISORY  WRITE 0 fe:00:10077025 0 EOF
6: FLOCK  ADVISORY  WRITE 55 fe:00:99 0 EOF
7: OFDLCK ADVISORY  READ -1 00:19:4 0 EOF
`

func TestParseFlockHolders(t *testing.T) {
	for _, c := range []struct {
		name    string
		writers bool
		want    []int
	}{
		{"every holder", false, []int{807, 812}},
		{"exclusive holders", true, []int{807}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseFlockHolders([]byte(procLocks), 0xfe, 0, 10077025, c.writers); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	if got := parseFlockHolders([]byte(procLocks), 0xfe, 1, 10077025, false); got != nil {
		t.Errorf("another device: %v", got)
	}
}

// FuzzParseFlockHolders: whatever /proc/locks holds, the parse does not
// panic and gives positive pids, sorted, each once.
func FuzzParseFlockHolders(f *testing.F) {
	f.Add([]byte(procLocks), uint32(0xfe), uint32(0), uint64(10077025), false)
	if b, err := os.ReadFile("/proc/locks"); err == nil {
		f.Add(b, uint32(0), uint32(0), uint64(0), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, major, minor uint32, ino uint64, writers bool) {
		pids := parseFlockHolders(b, major, minor, ino, writers)
		for i, p := range pids {
			if p <= 0 || i > 0 && pids[i-1] >= p {
				t.Fatalf("pids %v", pids)
			}
		}
	})
}

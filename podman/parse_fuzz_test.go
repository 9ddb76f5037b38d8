package podman

import (
	"strconv"
	"strings"
	"testing"
)

// Seeds are what podman 4.3.1 and Linux 6.1 printed on the project's VM
// (a container run with exit 3, one only created; this process's stat).
const (
	seedStat = "13651 (cat) R 13532 13532 27194 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 2910761 3133440 382 18446744073709551615 94764398170112 94764398189993 140724034427904 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94764398206000 94764398207616 94765225422848 140724034431670 140724034431690 140724034431690 140724034433003 0\n"
	seedPS   = "cruxprov-0f3a9c\t4026531836:123:2910761\ncruxprov-fixh-created\tx\nfixh-seed\t4026531836:123:456\n"
)

// FuzzParseState: whatever podman container inspect prints, parseState
// says started only with an exit code a process can have (0–255, as
// written), and never panics.
func FuzzParseState(f *testing.F) {
	for _, s := range []string{"3 false\n", "0 true\n", "137 false\n", "0 false", "Error: no such container\n", "-1 false", "+3 false", "256 false", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		code, started, ok := parseState(out)
		if !ok && (started || code != 0) {
			t.Fatalf("not ok yet %d %v", code, started)
		}
		if started {
			f := strings.Fields(string(out))[0]
			n, err := strconv.Atoi(f)
			if code < 0 || code > 255 || strings.Trim(f, "0123456789") != "" || err != nil || n != code {
				t.Fatalf("%q: code %d", out, code)
			}
		}
	})
}

// FuzzParsePS: whatever podman ps prints (a warning on stdout, another
// format), parsePS lists only names of runs (cruxprov-…) that podman rm
// takes as one argument, each from one line.
func FuzzParsePS(f *testing.F) {
	for _, s := range []string{seedPS, "", "WARN[0000] something\n", "cruxprov-a\n", "cruxprov-a b\tx", "\tcruxprov-a\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, c := range parsePS(out) {
			if !strings.HasPrefix(c.name, "cruxprov-") || strings.ContainsAny(c.name, " \t\r\n\x00") || strings.Contains(c.owner, "\n") {
				t.Fatalf("%q: %+v", out, c)
			}
			if !strings.Contains(string(out), c.name+"\t"+c.owner) {
				t.Fatalf("%q: %+v is not a line of it", out, c)
			}
		}
	})
}

// FuzzStatStartTime: whatever a /proc/PID/stat holds (a command name
// with spaces and parentheses, a truncated line), statStartTime returns
// field 22 only when it is a number.
func FuzzStatStartTime(f *testing.F) {
	for _, s := range []string{seedStat, "1 (a) b) R 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0\n", "1 (x", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := statStartTime(b)
		if ok && (st == "" || strings.Trim(st, "0123456789") != "") {
			t.Fatalf("%q: start %q", b, st)
		}
	})
}

// FuzzOwnerGone: a container's executor label is whatever was written on
// it; ownerGone never panics and never says a process of another pid
// namespace, or an id it cannot read, is gone.
func FuzzOwnerGone(f *testing.F) {
	self := ownerID()
	for _, s := range []string{self, "4026531836:123:456", "x", "", "1:2", "::", self + "x"} {
		f.Add(s)
	}
	ns, _, _ := strings.Cut(self, ":")
	f.Fuzz(func(t *testing.T, id string) {
		gone := ownerGone(id)
		if id == self && gone {
			t.Fatal("this process is gone")
		}
		idNS, rest, _ := strings.Cut(id, ":")
		pid, _, _ := strings.Cut(rest, ":")
		if gone && (idNS != ns || strings.Trim(pid, "0123456789") != "" || pid == "") {
			t.Fatalf("%q: gone", id)
		}
	})
}

// TestParseStateRefusesImpossibleCodes: an exit code no process has is
// not a started container's (it was taken: "-1", "+3", "4096").
func TestParseStateRefusesImpossibleCodes(t *testing.T) {
	for _, s := range []string{"-1 false", "+3 false", "4096 false", "0x3 false"} {
		if code, started, ok := parseState([]byte(s)); ok || started {
			t.Errorf("%q: %d %v %v", s, code, started, ok)
		}
	}
	if code, started, ok := parseState([]byte("137 false\n")); !ok || !started || code != 137 {
		t.Errorf("137: %d %v %v", code, started, ok)
	}
}

// TestOwnerGoneWholePid: a label whose pid has trailing garbage names no
// process (Sscanf read "<pid>x" as that pid).
func TestOwnerGoneWholePid(t *testing.T) {
	ns, _, _ := strings.Cut(ownerID(), ":")
	if ns == "" {
		t.Skip("no /proc")
	}
	// pid 2^22+1 is above pid_max's default ceiling: no such process.
	if !ownerGone(ns + ":4194305:1") {
		t.Skip("pid 4194305 exists")
	}
	if ownerGone(ns + ":4194305x:1") {
		t.Error("an executor id with pid 4194305x is taken for gone")
	}
}

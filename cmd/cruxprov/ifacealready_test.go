package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestInterfaceRegisterAgainSaysAlready: registering the schema an id is
// registered with already (the same command run again, a spelling of the
// same JSON) says so: "already registered" on stdout, "already": true in
// --json, exit 0, and nothing is appended to the history nor
// interfaces.json rewritten. Before, it printed the first registration's
// line, as if it had just registered it (the history was not appended to
// then either). A new registration says "already": false.
func TestInterfaceRegisterAgainSaysAlready(t *testing.T) {
	home, _, run := keyedHome(t, "a")
	schema := filepath.Join(t.TempDir(), "echo.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","title":"echo"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("interface", "register", "acme.echo/v1", "--schema", schema, "--json")
	var first struct {
		ID, Digest string
		Already    *bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &first) != nil || first.Already == nil || *first.Already {
		t.Fatalf("first register: %+v", r)
	}
	if r := run("interface", "register", "acme.other/v1", "--schema", schema); r.code != 0 || strings.Contains(r.stdout, "already") {
		t.Fatalf("first register, text (another id): %+v", r)
	}
	reg := filepath.Join(home, "registry")
	logBefore, _ := os.ReadFile(filepath.Join(reg, "log.jsonl"))
	ifBefore, _ := os.Stat(filepath.Join(reg, "interfaces.json"))
	// The same JSON, spelled otherwise: its canonical form is the same.
	if err := os.WriteFile(schema, []byte("{\"title\": \"echo\",\n \"type\": \"object\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run("interface", "register", "acme.echo/v1", "--schema", schema)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "already registered acme.echo/v1 "+first.Digest+" (at ") || !strings.Contains(r.stdout, "nothing changed") {
		t.Errorf("register again: %+v", r)
	}
	r = run("interface", "register", "acme.echo/v1", "--schema", schema, "--json")
	var again struct {
		ID, Digest string
		Already    bool
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &again) != nil || !again.Already || again.ID != "acme.echo/v1" || again.Digest != first.Digest {
		t.Errorf("register again --json: %+v", r)
	}
	logAfter, _ := os.ReadFile(filepath.Join(reg, "log.jsonl"))
	ifAfter, _ := os.Stat(filepath.Join(reg, "interfaces.json"))
	if string(logAfter) != string(logBefore) || !ifAfter.ModTime().Equal(ifBefore.ModTime()) {
		t.Errorf("register again changed the registry: history %d → %d bytes, interfaces.json %v → %v", len(logBefore), len(logAfter), ifBefore.ModTime(), ifAfter.ModTime())
	}
}

// TestInterfaceRegisterAtOnceOneSaysRegistered: two interface register
// of one schema at once, both having read the registry before either
// registers (held apart by a shared hold of the registry's lock, which
// lets reads through and keeps the registration waiting): exactly one
// says it registered, the other "already registered", and the history
// has one entry. Before, the command decided "already" from the
// interfaces it read before registering: both said registered (seen with
// four processes at once, two said it, one entry recorded).
func TestInterfaceRegisterAtOnceOneSaysRegistered(t *testing.T) {
	home, _, _ := keyedHome(t, "a")
	schema := filepath.Join(t.TempDir(), "echo.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(home, "registry", ".lock")
	lf, err := os.Open(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(lf.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	const n = 2
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		outs[i] = new(bytes.Buffer)
		cmds[i] = exec.Command(bin, "--home", home, "interface", "register", "acme.echo/v1", "--schema", schema, "--json")
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Both wait for the lock exclusive (in /proc/locks, "->" a waiter
	// of the lock file's inode): each has read what it reads first.
	waiters := func() int {
		b, _ := os.ReadFile("/proc/locks")
		c := 0
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, "->") {
				continue
			}
			for _, f := range strings.Fields(l) {
				if strings.HasSuffix(f, fmt.Sprintf(":%d", st.Ino)) {
					c++
				}
			}
		}
		return c
	}
	for deadline := time.Now().Add(2 * time.Minute); waiters() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			lf.Close()
			for _, c := range cmds {
				c.Wait()
			}
			t.Fatalf("the registrations did not both wait for the registry's lock; /proc/locks has %d waiters", waiters())
		}
	}
	lf.Close()
	registered := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("register %d: %v: %s", i, err, outs[i])
		}
		var r struct{ Already *bool }
		if err := json.Unmarshal(outs[i].Bytes(), &r); err != nil || r.Already == nil {
			t.Fatalf("register %d: %v: %s", i, err, outs[i])
		}
		if !*r.Already {
			registered++
		}
	}
	log, _ := os.ReadFile(filepath.Join(home, "registry", "log.jsonl"))
	if entries := strings.Count(string(log), `"interface-registered"`); registered != 1 || entries != 1 {
		t.Errorf("%d registrations at once: %d say registered (want 1), %d history entries (want 1): %s / %s", n, registered, entries, outs[0], outs[1])
	}
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecutorReadsBesideAWriter: an executor (uid 65534, who may only
// read the operator's store) that reads the registry while the operator's
// mutation is writing it waits out the change and reads the state after
// it. Before, it refused registry_corrupt: "a registry change was
// interrupted" for the journal of a live writer (verify, run, every list,
// seen in a loop beside `interface register`), and an interface the
// history did not record yet for a reader that read interfaces.json
// after the writer replaced it and the history before the writer
// appended to it. The writer here is the test, holding the registry's
// lock as a mutation does while its files are half written; a journal
// still there once the lock is free is a dead writer's, and is still
// refused.
func TestExecutorReadsBesideAWriter(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-rw-", "")
	home := filepath.Join(base, "home")
	schema := filepath.Join(base, "echo.schema.json")
	os.WriteFile(schema, []byte(`{"type":"object"}`), 0o644)
	if r := cruxprov(t, "--home", home, "interface", "register", "cruxible.echo/v1", "--schema", schema); r.code != 0 {
		t.Fatalf("register: %+v", r)
	}
	reg := filepath.Join(home, "registry")
	reader := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &se
	}
	// writing holds the registry's lock as a mutation does, makes the
	// transient state, starts the reader, and after a while puts the
	// state back (finish) and lets the lock go.
	writing := func(name string, transient, finish func(), args ...string) (int, string) {
		t.Helper()
		lf, err := os.OpenFile(filepath.Join(reg, ".lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		transient()
		cmd, se := reader(args...)
		time.Sleep(500 * time.Millisecond)
		finish()
		unix.Flock(int(lf.Fd()), unix.LOCK_UN)
		cmd.Wait()
		return cmd.ProcessState.ExitCode(), se.String()
	}
	journal := filepath.Join(reg, "journal.json")
	putJournal := func() {
		os.WriteFile(journal, []byte(`{"format":"cruxprov.registry-journal/v1","log_size":0,"log":null,"files":[]}`), 0o644)
	}
	removeJournal := func() { os.Remove(journal) }
	for _, args := range [][]string{{"interface", "list"}, {"registry", "log", "--verify"}, {"verify", "acme-echo"}} {
		code, msg := writing("journal", putJournal, removeJournal, args...)
		want := 0
		if args[0] == "verify" {
			want = exitRefused // no pin: pin_unapproved, after the change
		}
		if code != want || strings.Contains(msg, "registry_corrupt") {
			t.Errorf("%v beside a live writer's journal: exit %d, %s", args, code, msg)
		}
	}
	// A reader that reads interfaces.json in the writer's change.
	ifaces := filepath.Join(reg, "interfaces.json")
	orig, err := os.ReadFile(ifaces)
	if err != nil {
		t.Fatal(err)
	}
	half := func() {
		os.WriteFile(ifaces, bytes.Replace(orig, []byte(`"cruxible.echo/v1"`), []byte(`"cruxible.other/v1"`), 1), 0o644)
	}
	whole := func() { os.WriteFile(ifaces, orig, 0o644) }
	for _, args := range [][]string{{"interface", "list"}, {"changeset", "list"}, {"provider", "list"}} {
		if code, msg := writing("interfaces", half, whole, args...); code != 0 || strings.Contains(msg, "registry_corrupt") {
			t.Errorf("%v beside a writer's half-written change: exit %d, %s", args, code, msg)
		}
	}
	// A dead writer's journal is still refused, and says who finishes it.
	putJournal()
	defer removeJournal()
	cmd, se := reader("interface", "list")
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitRefused || !strings.Contains(se.String(), "registry_corrupt: a registry change was interrupted") {
		t.Errorf("a dead writer's journal: exit %d, %s", code, se.String())
	}
}

package invoke

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const ttyChildEnv = "CRUXPROV_TEST_TTY_CHILD"

// TestNoControllingTerminal: an executor run from an operator's terminal
// starts the provider without it. The test gives a child of its own a
// pseudo-terminal as its controlling terminal (as a login shell has);
// that child starts a process as the executor starts the harness, which
// must fail to open /dev/tty, while one started plainly opens it (so the
// test can fail).
func TestNoControllingTerminal(t *testing.T) {
	if os.Getenv(ttyChildEnv) != "" {
		ttyChild(t)
		return
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	go func() { // drain what the child writes to the terminal
		b := make([]byte, 4096)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	var out strings.Builder
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoControllingTerminal$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ttyChildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "--- PASS: TestNoControllingTerminal") {
		t.Fatalf("the child on a terminal: %v\n%s", err, out.String())
	}
}

func ttyChild(t *testing.T) {
	open := exec.Command("/bin/sh", "-c", "exec 3<>/dev/tty")
	if out, err := open.CombinedOutput(); err != nil {
		t.Fatalf("a process started plainly cannot open its terminal either, so this proves nothing: %v %s", err, out)
	}
	for _, ns := range []bool{false, true} {
		cmd := exec.Command("/bin/sh", "-c", "exec 3<>/dev/tty && echo opened")
		cmd.SysProcAttr = sysProcAttr(ns)
		out, err := cmd.CombinedOutput()
		if ns && err != nil && nsUnavailable(err) {
			t.Logf("namespaces refused here (%v): the plain case stands", err)
			continue
		}
		if err == nil || strings.Contains(string(out), "opened") {
			t.Errorf("ns=%v: the provider's process opened the operator's terminal: %s", ns, out)
		}
	}
}

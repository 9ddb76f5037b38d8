package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pid1Env marks the test binary re-run by asInitCmd as the first process of a
// new pid and mount namespace: it mounts that namespace's /proc and execs the
// rest of its argv (cruxshim and its arguments), so cruxshim is pid 1, as in
// a container. With the value "ignore-hup" it ignores SIGHUP before the exec.
const pid1Env = "CRUXSHIM_TEST_PID1"

// pid1NoProc is the wrapper's exit status when it cannot mount /proc.
const pid1NoProc = 125

func pid1Wrapper() {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "make / private:", err)
		os.Exit(pid1NoProc)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fmt.Fprintln(os.Stderr, "mount /proc:", err)
		os.Exit(pid1NoProc)
	}
	if os.Getenv(pid1Env) == "ignore-hup" {
		signal.Ignore(syscall.SIGHUP)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, pid1Env+"=") {
			env = append(env, kv)
		}
	}
	err := unix.Exec(os.Args[1], os.Args[1:], env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(pid1NoProc)
}

// asInitCmd is cruxshim with args as pid 1 of a new pid namespace with its own
// /proc: as root, a pid and mount namespace; otherwise a user namespace too,
// mapping the caller to root in it (as unshare -r does: the wrapper needs
// CAP_SYS_ADMIN there to mount /proc). cmd.Process.Pid is the init's pid
// outside.
func asInitCmd(args, env []string, extra ...*os.File) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{shimBin}, args...)...)
	cmd.Env = append([]string{pid1Env + "=1", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}, env...)
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return cmd
}

// runAsInit runs cruxshim as pid 1 to its end, skipping where the machine
// forbids the namespaces.
func runAsInit(t *testing.T, args, env []string, extra ...*os.File) result {
	t.Helper()
	canInit(t)
	return runCmd(t, asInitCmd(args, env, extra...), nil)
}

// canInit skips t where a pid namespace with its own /proc cannot be made.
func canInit(t *testing.T) {
	t.Helper()
	cmd := asInitCmd([]string{"true"}, nil)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EUSERS):
		skipped.Store(true)
		t.Skipf("cannot make a pid namespace here (%v): the kernel or a seccomp filter forbids it (as an unprivileged user, user namespaces must be enabled)", err)
	case errors.As(err, &ee) && ee.ExitCode() == pid1NoProc:
		skipped.Store(true)
		t.Skipf("cannot mount /proc in a new pid namespace here: %s", out)
	default:
		t.Fatalf("cruxshim true as pid 1: %v: %s", err, out)
	}
}

// TestInit: as a pid namespace's first process (a container's pid 1) the
// shim does not exec CMD but starts it as its child and stays as its init.
// Each case fails where the shim execs CMD as pid 1.
func TestInit(t *testing.T) {
	canInit(t)
	bundle := testBundle(50)
	t.Run("delivers, reaps, holds nothing", func(t *testing.T) {
		r := runAsInit(t, []string{"--secret-pipe-fd", "3", childBin}, []string{"CHILD_MODE=init"}, pipeWith(t, bundle))
		rep := wantDelivered(t, r, string(bundle))
		if rep.Pid == 1 || rep.PPid != 1 {
			t.Errorf("CMD is pid %d, its parent %d: want CMD not pid 1, the shim its parent", rep.Pid, rep.PPid)
		}
		if rep.Orphan != "reaped" {
			t.Errorf("an orphan of CMD: %s, want reaped by the init", rep.Orphan)
		}
		if e, ok := rep.InitFDs[-1]; ok {
			t.Fatalf("cannot list pid 1's descriptors: %s", e)
		}
		for fd, link := range rep.InitFDs {
			if strings.Contains(link, memfdName) || strings.HasPrefix(link, "pipe:") && fd != 2 {
				t.Errorf("the init holds %d -> %s: want no copy of the memory file or a run pipe but stderr", fd, link)
			}
		}
		if rep.InitFDs[0] != "/dev/null" || rep.InitFDs[1] != "/dev/null" {
			t.Errorf("the init's stdin and stdout are %q and %q, want /dev/null", rep.InitFDs[0], rep.InitFDs[1])
		}
	})
	t.Run("exit status", func(t *testing.T) {
		r := runAsInit(t, []string{childBin}, []string{"CHILD_MODE=init", "CHILD_EXIT=7"})
		var rep report
		if r.code != 7 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Pid == 1 {
			t.Fatalf("exit %d, stderr %q, stdout %q: want CMD's 7, CMD not pid 1", r.code, r.stderr, r.stdout)
		}
		if rep.FD3Open {
			t.Errorf("fd 3 is open in CMD with no secret flag: %v", rep.FDs)
		}
	})
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run("self "+unix.SignalName(sig), func(t *testing.T) {
			// As pid 1 CMD would survive its own signal (exit 0), or the
			// Go runtime would exit 2 after its raise was ignored.
			r := runAsInit(t, []string{childBin}, []string{"CHILD_MODE=selfkill", "CHILD_SIGNAL=" + strconv.Itoa(int(sig))})
			if r.code != 128+int(sig) {
				t.Errorf("CMD killed itself with %v: the init exited %d, want %d (stderr %q)", sig, r.code, 128+int(sig), r.stderr)
			}
		})
	}
	t.Run("ignored SIGHUP stays ignored", func(t *testing.T) {
		// As across the exec: CMD starts with SIGHUP ignored.
		r := runAsInit(t, []string{childBin}, []string{pid1Env + "=ignore-hup", "CHILD_MODE=init"})
		var rep report
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Pid == 1 {
			t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
		}
		if ign, err := strconv.ParseUint(rep.SigIgn, 16, 64); err != nil || ign&(1<<(syscall.SIGHUP-1)) == 0 {
			t.Errorf("CMD's SigIgn %q: want SIGHUP ignored, as the shim was started", rep.SigIgn)
		}
	})
	t.Run("exec failed", func(t *testing.T) {
		notExec := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, runAsInit(t, []string{"--secret-pipe-fd", "3", notExec}, nil, pipeWith(t, bundle)), codeExecFailed)
	})
	for _, variant := range []struct{ name, wrapper string }{
		{"signals forwarded", "1"},
		// SIGHUP ignored at the start: CMD starts with it ignored, and a
		// CMD that installs its own handler still gets the SIGHUP sent to
		// pid 1, as it would across an exec (the init ignored it itself,
		// so it never passed it on).
		{"signals forwarded when SIGHUP was ignored at the start", "ignore-hup"},
	} {
		t.Run(variant.name, func(t *testing.T) { initForwards(t, variant.wrapper) })
	}
}

// initForwards: cruxshim as pid 1 (its wrapper run with pid1Env=wrapper)
// passes SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to a CMD that
// catches them, and exits 143 when SIGTERM, uncaught, kills CMD.
func initForwards(t *testing.T, wrapper string) {
	canInit(t)
	{
		cmd := asInitCmd([]string{"--secret-pipe-fd", "3", childBin}, []string{"CHILD_MODE=signals", pid1Env + "=" + wrapper}, pipeWith(t, testBundle(50)))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		lines := bufio.NewReader(stdout)
		line := func() string {
			s, _ := lines.ReadString('\n')
			return strings.TrimSpace(s)
		}
		if got := line(); got != "ready" {
			t.Fatalf("CMD said %q, want ready (stderr %q)", got, stderr.String())
		}
		// The wrapper's exec keeps its pid: cmd.Process.Pid is the shim's.
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if got := line(); got != strconv.Itoa(int(sig)) {
				t.Errorf("sent %v to pid 1, CMD saw %q", sig, got)
			}
		}
		// SIGTERM, uncaught by CMD, kills it; the init exits 128+15.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, stdout)
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("after SIGTERM to pid 1: %v, want exit 143 (stderr %q)", err, stderr.String())
		}
	}
}

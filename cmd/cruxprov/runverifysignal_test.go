package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestRunInterruptedInItsVerify: a SIGINT that comes while `cruxprov run`
// verifies the pin's env (strace delivers it as the run opens the env's
// seal) ends the run as interrupted, nothing spawned, and records
// nothing. The executor took the verification's error, the context's,
// for a refusal of the env: the ledger got a refused outcome env_drift,
// "verify refused the run: context canceled", for an env that never
// drifted (scripts/interrupt-stress.py, a run interrupted 89 ms in). The
// same run again succeeds.
func TestRunInterruptedInItsVerify(t *testing.T) {
	strace := straceOrSkip(t)
	home, envPath, env, run, in, tok := acceptedEcho(t, `{"seconds": 0}`)
	ledger := filepath.Join(filepath.Dir(home), "ledger", "l.jsonl")
	args := []string{"--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", envPath + ".seal.json",
		"-e", "trace=openat,open", "-e", "inject=openat,open:signal=SIGINT:delay_exit=300000:when=1", bin}, args...)...)
	cmd.Env = env
	r := runCmd(t, cmd)
	// The open returns 300 ms after the signal: the context is cancelled
	// while the verify is still in it (a goroutine cancels it, and under
	// the race detector on a loaded host the verify could end before it
	// ran, and the run meet the cancel only after its intent, recorded
	// "before the provider started", which TestRunInterruptedBeforeItsSpawn
	// covers).
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: interrupted by a signal") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("interrupted in its verify: %+v", r)
	}
	if b, err := os.ReadFile(ledger); len(b) > 0 {
		t.Fatalf("interrupted in its verify, the run recorded (%v):\n%s", err, b)
	}
	run("run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--ledger", ledger)
	if a := attempts(t, run, ledger); len(a) != 1 || a[0].Outcome == nil || a[0].Outcome.Status != "ok" {
		t.Fatalf("the run again: %+v", a)
	}
}

// TestRunInterruptedBeforeItsSpawn: a SIGINT that comes once the run's
// intent is written but before its process starts (strace holds the
// thread that wrote the intent 150 ms after its write, and the test
// sends the signal then) starts nothing: the outcome is cancelled, exit
// code -1, "before the provider started: nothing ran", and the command
// ends at once. The run was started all the same and the executor's
// SIGTERM came before the namespace's init shell had started the
// harness: the shell, with no handler, ignored it, and the provider ran
// on, to its end (recorded cancelled with exit code 0: it had done its
// work) or to the grace's SIGKILL, 2 s after the Ctrl-C
// (scripts/interrupt-stress.py: 1.4 s to exit). Here the provider would
// sleep 5 s. strace sent the signal itself, at the intent's write, but
// it counts a syscall's calls per thread, and the outcome's write, on
// another thread, got a second one, which now stops the command at once.
func TestRunInterruptedBeforeItsSpawn(t *testing.T) {
	strace := straceOrSkip(t)
	home, _, env, run, in, tok := acceptedEcho(t, `{"seconds": 5}`)
	ledger := filepath.Join(filepath.Dir(home), "ledger", "l.jsonl")
	args := []string{"--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", ledger,
		"-e", "trace=write,pwrite64", "-e", "inject=write,pwrite64:delay_exit=150000:when=1", bin}, args...)...)
	cmd.Env = env
	start := time.Now()
	r := signalledAt(t, cmd, func() bool { b, _ := os.ReadFile(ledger); return len(b) > 0 }, syscall.SIGINT)
	took := time.Since(start)
	if r.code != exitFailure || !strings.Contains(r.stderr, "the caller cancelled the run (interrupt signal received), before the provider started: nothing ran") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("interrupted before its spawn (%s): %+v", took, r)
	}
	a := attempts(t, run, ledger)
	if len(a) != 1 || a[0].Outcome == nil || a[0].Outcome.Status != "error" || a[0].Outcome.ErrorCode != "cancelled" || a[0].Outcome.ExitCode != -1 {
		t.Fatalf("interrupted before its spawn, the ledger: %+v", a)
	}
	if took > 1500*time.Millisecond {
		t.Fatalf("interrupted before its spawn, it took %s", took)
	}
}

// acceptedEcho is a home in which acme-echo is installed and accepted,
// the environment to run the binary in, run (which must succeed), and
// an input file holding input and a secret's file for a run of it.
func acceptedEcho(t *testing.T, input string) (home, envPath string, env []string, run func(args ...string) result, in, tok string) {
	t.Helper()
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	base := testdir.New(t) // its envs are read-only: the unprivileged CI pass must remove them
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home, keys := filepath.Join(base, "home"), filepath.Join(base, "keys")
	env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
	run = func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	for _, id := range []string{"acme.echo", "acme.diagnostics"} {
		run("interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json"))
	}
	var v struct {
		ChangeSet struct {
			Metadata struct{ ID string }
			Spec     struct {
				Changes []struct {
					Provider struct{ Materializations []struct{ Path string } }
				}
			}
		} `json:"changeSet"`
	}
	r := run("install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.ChangeSet.Spec.Changes) == 0 || len(v.ChangeSet.Spec.Changes[0].Provider.Materializations) == 0 {
		t.Fatalf("install: %v: %s", err, r.stdout)
	}
	envPath = v.ChangeSet.Spec.Changes[0].Provider.Materializations[0].Path
	os.MkdirAll(keys, 0o700)
	run("key", "generate", "--out", filepath.Join(keys, "alice"))
	run("key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice")
	run("changeset", "approve", v.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "alice.key"))
	in, tok = filepath.Join(base, "in.json"), filepath.Join(base, "tok")
	os.WriteFile(in, []byte(input), 0o644)
	os.WriteFile(tok, []byte("s3cr3t"), 0o600)
	return home, envPath, env, run, in, tok
}

// ledgerAttempt is an attempt as receipts list --json gives it.
type ledgerAttempt struct {
	Outcome *struct {
		Status    string `json:"status"`
		ErrorCode string `json:"error_code"`
		ExitCode  int    `json:"exit_code"`
	} `json:"outcome"`
}

// attempts lists the attempts of ledger.
func attempts(t *testing.T, run func(args ...string) result, ledger string) []ledgerAttempt {
	t.Helper()
	var l struct {
		Attempts []ledgerAttempt `json:"attempts"`
	}
	if r := run("receipts", "list", "--ledger", ledger, "--json"); json.Unmarshal([]byte(r.stdout), &l) != nil {
		t.Fatalf("receipts list: %s", r.stdout)
	}
	return l.Attempts
}

// signalledAt runs cmd, a strace of the binary, and sends sig once to the
// binary (strace's child) as soon as cond holds, and returns what it did.
func signalledAt(t *testing.T, cmd *exec.Cmd, cond func() bool, sig syscall.Signal) result {
	t.Helper()
	strace := cmd.Path
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(60 * time.Second); !cond(); {
		select {
		case <-exited:
			t.Fatalf("ended before the signal: %s", se.String())
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("not ready for the signal in 60 s: %s", se.String())
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) == 0 {
		t.Fatalf("no child of strace: %v", err)
	}
	pid, _ := strconv.Atoi(f[0])
	syscall.Kill(pid, sig)
	<-exited
	// strace's own lines (where a path it was given resolves to, a
	// tracee killed while it held it) go, and the notice of a stop that
	// took longer than noticeAfter: strace's hold delays the stop.
	var lines []string
	for _, l := range strings.SplitAfter(se.String(), "\n") {
		if !strings.HasPrefix(l, "strace: ") && !strings.HasPrefix(l, strace+": ") && l != stoppingNotice+"\n" {
			lines = append(lines, l)
		}
	}
	return result{so.String(), strings.Join(lines, ""), cmd.ProcessState.ExitCode()}
}

// TestRunInterruptedAsItsProcessStarts: a SIGINT that comes after the
// executor's last look at the context but before the namespace's init
// shell has started the harness (strace holds the run's process 300 ms
// before its exec of the shell, and the test sends the signal then)
// starts no provider: the command ends at once, the outcome cancelled,
// "as its process started: killed before the provider ran". The
// executor's SIGTERM reached only the init shell, which, as the first
// process of a pid namespace with no handler, ignored it, and started
// the harness after: the provider ran on, to the grace's SIGKILL 2 s
// later (a window of ~2 ms from the check to the shell's fork, wider on a
// loaded host). Here the provider would sleep 5 s.
func TestRunInterruptedAsItsProcessStarts(t *testing.T) {
	strace := straceOrSkip(t)
	home, _, env, run, in, tok := acceptedEcho(t, `{"seconds": 5}`)
	ledger := filepath.Join(filepath.Dir(home), "ledger", "l.jsonl")
	args := []string{"--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
	// The init shell's path as the executor execs it (strace says on
	// stderr what it resolves to, a line signalledAt drops).
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", "/bin/sh",
		"-e", "trace=execve", "-e", "inject=execve:delay_enter=300000", bin}, args...)...)
	cmd.Env = env
	var sent time.Time
	r := signalledAt(t, cmd, func() bool {
		if b, _ := os.ReadFile(ledger); len(b) == 0 {
			return false
		}
		// The intent is written: the run's process is the binary's
		// first child from now on.
		if !hasGrandchild(cmd.Process.Pid) {
			return false
		}
		sent = time.Now()
		return true
	}, syscall.SIGINT)
	took := time.Since(sent)
	if r.code != exitFailure || !strings.Contains(r.stderr, "the caller cancelled the run (interrupt signal received), as its process started: killed before the provider ran") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("interrupted as its process started (%s after the signal): exit %d: %q", took, r.code, r.stderr)
	}
	a := attempts(t, run, ledger)
	if len(a) != 1 || a[0].Outcome == nil || a[0].Outcome.Status != "error" || a[0].Outcome.ErrorCode != "cancelled" {
		t.Fatalf("interrupted as its process started, the ledger: %+v", a)
	}
	t.Logf("ended %s after the signal", took)
	if took > 1500*time.Millisecond {
		t.Fatalf("interrupted as its process started, it took %s after the signal", took)
	}
}

// hasGrandchild reports whether strace's child (the binary) pid has a
// child of its own.
func hasGrandchild(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	c, _ := strconv.Atoi(f[0])
	ts, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", c))
	for _, p := range ts {
		if b, _ := os.ReadFile(p); len(strings.Fields(string(b))) > 0 {
			return true
		}
	}
	return false
}

// TestRunInterruptedBeforeItsInitForks: a SIGINT that comes once the
// run's process has started, but before its init shell has started the
// harness (strace holds the shell's fork 500 ms, and the test sends the
// signal 150 ms into it, the executor past its look at the context once
// the process started), kills the init shell at once, and with it the pid
// namespace: no provider runs. The executor sent the init shell a SIGTERM,
// which the first process of a pid namespace ignores when it has no
// handler, and waited the grace: the shell started the harness, and the
// provider ran to the grace's SIGKILL, 2 s after the Ctrl-C. Here the
// provider would sleep 5 s.
func TestRunInterruptedBeforeItsInitForks(t *testing.T) {
	strace := straceOrSkip(t)
	home, _, env, run, in, tok := acceptedEcho(t, `{"seconds": 5}`)
	ledger := filepath.Join(filepath.Dir(home), "ledger", "l.jsonl")
	args := []string{"--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
	// Each thread's first fork is held (strace counts per thread): the
	// init shell's is its fork of the harness.
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null",
		"-e", "trace=clone,clone3,fork,vfork", "-e", "inject=clone,clone3,fork,vfork:delay_enter=500000:when=1", bin}, args...)...)
	cmd.Env = env
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("no /bin/sh: %v", err)
	}
	var sent time.Time
	r := signalledAt(t, cmd, func() bool {
		if b, _ := os.ReadFile(ledger); len(b) == 0 {
			return false
		}
		if !initShellAlone(cmd.Process.Pid, sh) {
			return false
		}
		time.Sleep(150 * time.Millisecond)
		sent = time.Now()
		return true
	}, syscall.SIGINT)
	took := time.Since(sent)
	if r.code != exitFailure || !strings.HasSuffix(strings.TrimSpace(r.stderr), "the caller cancelled the run (interrupt signal received)") && !strings.Contains(r.stderr, "the caller cancelled the run (interrupt signal received) (attempt") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("interrupted before its init forked (%s after the signal): exit %d: %q", took, r.code, r.stderr)
	}
	a := attempts(t, run, ledger)
	if len(a) != 1 || a[0].Outcome == nil || a[0].Outcome.Status != "error" || a[0].Outcome.ErrorCode != "cancelled" {
		t.Fatalf("interrupted before its init forked, the ledger: %+v", a)
	}
	t.Logf("ended %s after the signal", took)
	if took > 1500*time.Millisecond {
		t.Fatalf("interrupted before its init forked, it took %s after the signal", took)
	}
}

// initShellAlone reports whether the binary (strace's child pid) has a
// child running sh that has no child yet.
func initShellAlone(pid int, sh string) bool {
	kids := func(p int) []string {
		ts, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		var out []string
		for _, f := range ts {
			b, _ := os.ReadFile(f)
			out = append(out, strings.Fields(string(b))...)
		}
		return out
	}
	for _, b := range kids(pid) {
		for _, c := range kids(atoi(b)) {
			if exe, _ := os.Readlink("/proc/" + c + "/exe"); exe == sh {
				return len(kids(atoi(c))) == 0
			}
		}
	}
	return false
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

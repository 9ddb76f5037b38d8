package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/store"
)

// holdFlock flocks the store's file name (another process's open file:
// a gc that waits holds .gate exclusive, one that runs .lock exclusive,
// a run .lock shared) until the returned func.
func holdFlock(t *testing.T, home, name string, how int) func() {
	t.Helper()
	f, err := os.Open(filepath.Join(home, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { f.Close() }) }
	t.Cleanup(release)
	return release
}

// TestSaysItWaitsForTheStore: a command that has to wait for the store
// (behind a gc that waits for it, holding its gate, or for a gc holding
// it) says so once on stderr, naming what it waits for and that Ctrl-C
// stops it; with --json, stdout holds the one document and nothing of
// it. Interrupted while it waits, it exits 1 (interrupted), and a run
// leaves no receipt. Before, run, verify, env verify, env create,
// fetch, install and gc --wait waited without a word (a run behind a
// gc --wait behind a long run seemed to hang). An image build, which
// holds the store while it reads its base and caches what it found
// there, waits so too.
func TestSaysItWaitsForTheStore(t *testing.T) {
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	env := append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
	for _, id := range []string{"acme.echo", "acme.diagnostics"} {
		cmd := exec.Command(bin, "--home", home, "interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json"))
		cmd.Env = env
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("register %s: %+v", id, r)
		}
	}
	if _, err := store.Open(home); err != nil { // its .gate (interface register makes none)
		t.Fatal(err)
	}
	idx, lock, _ := fetchFixture(t)
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message": "hi"}`), 0o644)
	ledger := filepath.Join(base, "ledger", "l.jsonl")
	const env0 = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

	// wait starts args, waits for it to say it waits (want in the line),
	// then interrupts it (sig) and checks how it ends.
	wait := func(what string, sig syscall.Signal, want string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		var so, se syncBuffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := "waiting for the store " + home + ": "
		for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(se.String(), line); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s: said nothing of its wait; stderr %q, stdout %q", what, se.String(), so.String())
			}
		}
		time.Sleep(300 * time.Millisecond) // still waiting, and not saying it again
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != exitFailure {
			t.Errorf("%s, interrupted while it waits: %v, stderr %q", what, err, se.String())
		}
		stderr := se.String()
		if strings.Count(stderr, "waiting for the store") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "Ctrl-C stops waiting") || !strings.Contains(stderr, "interrupted by a signal") {
			t.Errorf("%s: stderr %q", what, stderr)
		}
		var doc struct {
			Error struct{ Kind string }
		}
		if dec := json.NewDecoder(strings.NewReader(so.String())); dec.Decode(&doc) != nil || dec.More() || doc.Error.Kind != "interrupted" {
			t.Errorf("%s --json: stdout %q is not the one interrupted document", what, so.String())
		}
		return stderr
	}
	shared := map[string][]string{
		"run":        {"run", "acme-echo", "echo", "--input", in, "--ledger", ledger, "--json"},
		"verify":     {"verify", "acme-echo", "--json"},
		"env verify": {"env", "verify", env0, "--json"},
		"env create": {"env", "create", "--wheel", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json"},
		"fetch":      {"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--json"},
		"install":    {"install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json"},
	}
	// An image build holds the store shared from before its base is
	// read until its layout is written (the base's interpreter and the
	// env layer are cached in the store): behind a gc it waits as the
	// others do, saying so, and stops at Ctrl-C or SIGTERM.
	// (Where there is no base image to build on, the subtest skips and
	// the others are checked all the same.)
	t.Run("image base", func(t *testing.T) {
		baseDir, baseDigest := imagetest.Base(t)
		shared["image build"] = []string{"image", "build", "--wheel", w.echo, "--index", w.url, "--platform", imagetest.Platform,
			"--base", "oci:" + baseDir + "@" + baseDigest.String(), "--shim", imagetest.Shim(t), "--output", "oci:" + filepath.Join(base, "image"), "--json"}
	})
	// Behind a gc that waits (its gate), then beside a gc that holds
	// the store: the holder (this process) is named by its pid.
	pid := strconv.Itoa(os.Getpid())
	release := holdFlock(t, home, ".gate", unix.LOCK_EX)
	for what, args := range shared {
		wait(what, syscall.SIGINT, "a gc --wait (or env remove; pid "+pid+") waits for it and goes first", args...)
	}
	release()
	release = holdFlock(t, home, ".lock", unix.LOCK_EX)
	for what, args := range shared {
		wait(what, syscall.SIGTERM, "a gc (or env remove; pid "+pid+") is using it", args...)
	}
	// A run's --timeout bounds its wait for the store too: it gives up,
	// exit 1, no receipt (it waited for ever past it: killed at 60s here).
	tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
	defer tcancel()
	c := exec.CommandContext(tctx, bin, "--home", home, "run", "acme-echo", "echo", "--input", in, "--ledger", ledger, "--timeout", "500ms")
	c.Env = env
	if r := runCmd(t, c); r.code != exitFailure || !strings.Contains(r.stderr, "gave up waiting for the store") || !strings.Contains(r.stderr, "the run's timeout, 500ms") {
		t.Errorf("run --timeout 500ms while a gc holds the store: %+v", r)
	}
	release()
	if _, err := os.Stat(ledger); !os.IsNotExist(err) {
		t.Errorf("a run interrupted while it waited for the store left a ledger: %v", err)
	}
	// A gc that waits, and env remove, beside a run.
	release = holdFlock(t, home, ".lock", unix.LOCK_SH)
	// It says it removed nothing: it said "what gc removed before it
	// stays removed".
	if stderr := wait("gc --wait", syscall.SIGINT, "the processes using it (pid "+pid+": runs,", "gc", "--wait", "--json"); !strings.Contains(stderr, "interrupted by a signal while gc waited for the store (other processes held it); gc removed nothing") {
		t.Errorf("gc --wait interrupted while it waited: %q", stderr)
	}
	wait("env remove", syscall.SIGTERM, "the processes using it (pid "+pid+": runs,", "env", "remove", env0, "--json")
	release()

	// Not waiting, nothing is said; once the gc is done, the command
	// goes on, and its --json document is the one thing on stdout.
	release = holdFlock(t, home, ".lock", unix.LOCK_EX)
	cmd := exec.Command(bin, "--home", home, "verify", "acme-echo", "--json")
	cmd.Env = env
	var so, se syncBuffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(se.String(), "waiting for the store"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("verify said nothing of its wait: %q", se.String())
		}
	}
	release()
	cmd.Wait()
	var doc struct{ Refused struct{ Code string } }
	if dec := json.NewDecoder(strings.NewReader(so.String())); dec.Decode(&doc) != nil || dec.More() || doc.Refused.Code != "pin_unapproved" {
		t.Errorf("verify once the gc was done: stdout %q, stderr %q", so.String(), se.String())
	}
	c = exec.Command(bin, "--home", home, "verify", "acme-echo")
	c.Env = env
	if r := runCmd(t, c); strings.Contains(r.stderr, "waiting") {
		t.Errorf("verify of a store no one holds: %+v", r)
	}
}

// TestExecutorBesideTheGate: an executor (uid 65534) who may only read
// the operator's store (root's) verifies and runs on it with its gate
// and on one made before the gate (no .gate, which it cannot make); it
// waits behind a waiting gc (saying so) where there is a gate, and for a
// gc holding the store where there is none: the store is still locked.
func TestExecutorBesideTheGate(t *testing.T) {
	const python = "/usr/bin/python3.11"
	base, exe := nobodyBase(t, "cruxprov-gate-", python)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	_, _, approveInstall := approvingStore(t, w, base, python)
	approveInstall()
	home := filepath.Join(base, "home")
	xstate := filepath.Join(base, "xstate")
	os.Mkdir(xstate, 0o755)
	os.Chown(xstate, 65534, 65534)
	secret, input := filepath.Join(base, "token"), filepath.Join(base, "input.json")
	os.WriteFile(secret, []byte("s3cr3t"), 0o644)
	os.WriteFile(input, []byte(`{"hello": "world"}`), 0o644)
	ex := func(args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "XDG_STATE_HOME=" + xstate}
		so, se := new(syncBuffer), new(syncBuffer)
		cmd.Stdout, cmd.Stderr = so, se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, so, se
	}
	commands := [][]string{
		{"verify", "acme-echo", "--deep"},
		{"run", "acme-echo", "echo", "--input", input, "--secret", "acme/api-token=@" + secret},
	}
	// check runs each command as the executor, while held (a flock on
	// the store's file name, how) if name is not "", expecting it to say
	// it waits (want) before held is let go.
	check := func(what, name string, how int, want string) {
		t.Helper()
		for _, args := range commands {
			release := func() {}
			if name != "" {
				release = holdFlock(t, home, name, how)
			}
			cmd, so, se := ex(args...)
			if want != "" {
				for deadline := time.Now().Add(time.Minute); !strings.Contains(se.String(), want); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						cmd.Wait()
						t.Fatalf("%s: %s said nothing of its wait: %q", what, args[0], se.String())
					}
				}
			}
			release()
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %s: %v: stdout %q, stderr %q", what, args[0], err, so.String(), se.String())
			}
			if args[0] == "run" && !strings.Contains(so.String(), `"hello":"world"`) {
				t.Errorf("%s: run: stdout %q", what, so.String())
			}
		}
	}
	gate := filepath.Join(home, ".gate")
	if _, err := os.Stat(gate); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid()) // the holder, named
	check("with the gate", "", 0, "")
	check("behind a waiting gc", ".gate", unix.LOCK_EX, "a gc --wait (or env remove; pid "+pid+") waits for it")
	check("beside a gc", ".lock", unix.LOCK_EX, "a gc (or env remove; pid "+pid+") is using it")
	os.Remove(gate) // a store made before the gate
	check("without the gate", "", 0, "")
	check("without the gate, beside a gc", ".lock", unix.LOCK_EX, "a gc (or env remove; pid "+pid+") is using it")
	if _, err := os.Stat(gate); !os.IsNotExist(err) {
		t.Errorf("the executor made the gate: %v", err)
	}
}

// TestNonWriterDoesNotWait: gc --wait and env remove by a user who may
// not write the store (an executor, uid 65534, on root's) fail at once
// while a run holds the store, saying why, rather than wait holding the
// gate: waiting, they held up every run, fetch and install that started
// meanwhile (the owner's verify waited behind an executor's gc --wait),
// to fail once they had the store.
func TestNonWriterDoesNotWait(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-nonwriter-", "")
	home := filepath.Join(base, "home")
	if _, err := store.Open(home); err != nil {
		t.Fatal(err)
	}
	env0 := filepath.Join(home, "envs", strings.Repeat("0", 64))
	if err := os.MkdirAll(env0, 0o755); err != nil {
		t.Fatal(err)
	}
	release := holdFlock(t, home, ".lock", unix.LOCK_SH) // a run
	defer release()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"gc", "--wait"}, exitFailure, "the store is not writable by this user (uid 65534), so gc does not wait for it"},
		{[]string{"gc", "--wait", "--envs"}, exitFailure, "the store is not writable by this user (uid 65534), so gc does not wait for it"},
		// The dry run it advises is one that waits: gc --dry-run fails
		// as gc does while the store is held ("or give --wait").
		{[]string{"gc"}, exitFailure, "run gc as the store's owner (gc --dry-run --wait shows what it would remove"},
		// Exit 1 as gc's: it was refused materialize_failed (78).
		{[]string{"env", "remove", env0}, exitFailure, "error: cannot remove the env " + env0 + ": the store is not writable by this user (uid 65534), and the store is in use"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, c.args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
			var se syncBuffer
			cmd.Stderr = &se
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("%v as a non-writer waited for the store: %q", c.args, se.String())
				return
			}
			if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(se.String(), c.want) || strings.Contains(se.String(), "waiting for the store") {
				t.Errorf("%v as a non-writer beside a run: exit %d, stderr %q", c.args, code, se.String())
			}
		})
	}
	if _, err := os.Stat(env0); err != nil {
		t.Errorf("the env is gone: %v", err)
	}
	// The advice works as a non-writer: the dry run waits for the run
	// and lists once it ends.
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home, "gc", "--dry-run", "--wait")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	var so, se syncBuffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(se.String(), "waiting for the store") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	release()
	if err := cmd.Wait(); err != nil || !strings.Contains(so.String(), "would remove") {
		t.Errorf("gc --dry-run --wait as a non-writer beside a run: %v, stdout %q, stderr %q", err, so.String(), se.String())
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
)

// TestGCEnvsBesideARun: a run holds the store's lock, shared, from its
// verification to its end, so gc --envs does not remove the env it runs
// in once an approval moved the pin to another env: gc says the store is
// in use (or waits, with --wait), and removes the env after the run.
// Before, run took no store lock, and gc --envs removed the env under
// the running provider (seen with a sleeping run beside install,
// approve and gc --envs).
func TestGCEnvsBesideARun(t *testing.T) {
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	base := testdir.New(t) // its envs are read-only: the unprivileged CI pass must remove them
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home, state := filepath.Join(base, "home"), filepath.Join(base, "state")
	keys := filepath.Join(base, "keys")
	os.MkdirAll(keys, 0o700)
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+state)
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		return runCmd(t, cmd)
	}
	must := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r
	}
	for _, id := range []string{"acme.echo", "acme.diagnostics"} {
		must(run("interface", "register", id, "--schema", filepath.Join(w.schemas, id+".json")), "register "+id)
	}
	propose := func(flags ...string) (id, envPath string) {
		t.Helper()
		r := must(run(append([]string{"install", w.echo, "--platform", "host", "--python", python, "--index", w.url, "--json"}, flags...)...), "install")
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
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.ChangeSet.Spec.Changes) == 0 || len(v.ChangeSet.Spec.Changes[0].Provider.Materializations) == 0 {
			t.Fatalf("install: %v: %s", err, r.stdout)
		}
		return v.ChangeSet.Metadata.ID, v.ChangeSet.Spec.Changes[0].Provider.Materializations[0].Path
	}
	id1, env1 := propose()
	must(run("key", "generate", "--out", filepath.Join(keys, "alice")), "key generate")
	must(run("key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice"), "key trust")
	must(run("changeset", "approve", id1, "--key", filepath.Join(keys, "alice.key")), "approve")

	in, tok := filepath.Join(base, "in.json"), filepath.Join(base, "tok")
	// Long enough for the proposal and approval below on a loaded
	// machine (with 3 s the run ended first there, and gc found the
	// store free); it is interrupted once gc has been refused.
	os.WriteFile(in, []byte(`{"seconds": 120}`), 0o644)
	os.WriteFile(tok, []byte("s3cr3t"), 0o600)
	ledger := filepath.Join(base, "ledger", "l.jsonl")
	cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--ledger", ledger)
	cmd.Env = env
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(ledger); err == nil && st.Size() > 0 {
			break // the run's intent is written: it runs
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the run did not start: %s", se.String())
		}
	}
	// The pin moves to another env (the same wheel without bytecode).
	id2, env2 := propose("--no-compile")
	if env2 == env1 {
		t.Fatalf("the same env twice: %s", env1)
	}
	must(run("changeset", "approve", id2, "--key", filepath.Join(keys, "alice.key")), "approve the other env")
	if r := run("gc", "--envs"); r.code != 1 || !strings.Contains(r.stderr, "store is in use") {
		t.Errorf("gc --envs beside a run: %+v", r)
	}
	if _, err := os.Stat(env1); err != nil {
		t.Errorf("the env of a run in flight: %v", err)
	}
	// A Ctrl-C ends the run (cancelled), its env then no one's.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	select {
	case err := <-ended:
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() <= 0 || !strings.Contains(se.String(), "cancel") {
			t.Errorf("the run, interrupted: %v: %s", err, se.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the run did not end 30 s after its Ctrl-C: %s", se.String())
	}
	if r := must(run("gc", "--envs"), "gc --envs after the run"); !strings.Contains(r.stdout, "removed envs/"+filepath.Base(env1)) {
		t.Errorf("gc --envs after the run: %+v", r)
	}

	// verify and env verify hold the store as a run does, from reading
	// the pin (or finding the env) to the walk's end: gc --envs says the
	// store is in use beside them. Before, they took no store lock, and
	// a gc --envs after an approval removed the env a verify was
	// walking (which then reported it missing or tampered with).
	nothing := func() {}
	verifyHolds(t, bin, home, env, filepath.Join(home, "registry", ".lock"), nothing, nothing, "verify", "acme-echo", "--deep")
	// env verify waits for the env's writer (its lock held) when it
	// finds the env changed (its seal gone): there it blocks.
	sealPath, aside := env2+".seal.json", env2+".seal.aside"
	verifyHolds(t, bin, home, env, filepath.Join(filepath.Dir(env2), "."+filepath.Base(env2)+".lock"),
		func() { os.Rename(sealPath, aside) }, func() { os.Rename(aside, sealPath) },
		"env", "verify", "sha256:"+filepath.Base(env2), "--deep")
}

// verifyHolds runs cruxprov args (a verify) while holding blocker
// exclusive, where the command is to block once it holds the store
// (the registry's lock: it reads the pin under it), and asserts that gc
// says the store is in use meanwhile, and that the command then ends
// well. setup runs before the command starts, restore before blocker
// is let go. A command that takes no store lock, or takes it only
// after blocker, fails it.
func verifyHolds(t *testing.T, bin, home string, env []string, blocker string, setup, restore func(), args ...string) {
	t.Helper()
	lf, err := os.OpenFile(blocker, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	setup()
	cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	lock, err := os.Open(filepath.Join(home, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if errors.Is(unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK) {
			break // the command holds the store
		}
		unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		select {
		case err := <-ended:
			t.Fatalf("%v ended without holding the store: %v: %s", args, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%v did not hold the store: %s", args, out.String())
		}
	}
	gc := exec.Command(bin, "--home", home, "gc", "--envs")
	gc.Env = env
	if b, err := gc.CombinedOutput(); err == nil || !strings.Contains(string(b), "store is in use") {
		t.Errorf("gc --envs beside %v: %v: %s", args, err, b)
	}
	restore()
	unix.Flock(int(lf.Fd()), unix.LOCK_UN)
	if err := <-ended; err != nil {
		t.Errorf("%v: %v: %s", args, err, out.String())
	}
}

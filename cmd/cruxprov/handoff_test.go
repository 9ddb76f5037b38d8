package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/python"
)

// TestRunHandsTheHarnessItsChannel: `cruxprov run` gives the executor
// the runtime's version from the verified seal (invoke.Call.Runtime), so
// that an env with the current runtime is started as DESIGN §10's python
// -I -m harness (python.Harness), no other process in front of it, with
// fd 1 on stderr from the start and the protocol channel on
// invoke.ProtocolFD, which python.ProtocolFDVar names in its initial
// environment (the harness removed it from os.environ since).
func TestRunHandsTheHarnessItsChannel(t *testing.T) {
	const py = "/usr/bin/python3.11"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("needs %s", py)
	}
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home := filepath.Join(base, "home")
	keys := filepath.Join(base, "keys")
	os.MkdirAll(keys, 0o700)
	env := append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
	run := func(args ...string) result {
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
	r := run("install", w.echo, "--platform", "host", "--python", py, "--index", w.url, "--json")
	var v struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
		Envs      map[string]string                      `json:"envs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Envs) != 1 {
		t.Fatalf("install: %v: %s", err, r.stdout)
	}
	var envDir string
	for _, e := range v.Envs {
		envDir = e
	}
	run("key", "generate", "--out", filepath.Join(keys, "alice"))
	run("key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice")
	run("changeset", "approve", v.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "alice.key"))

	in, tok := filepath.Join(base, "in.json"), filepath.Join(base, "tok")
	os.WriteFile(in, []byte(`{"seconds": 5}`), 0o644)
	os.WriteFile(tok, []byte("s3cr3t"), 0o600)
	cmd := exec.Command(bin, "--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--ledger", filepath.Join(base, "l.jsonl"))
	cmd.Env = env
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	want := []string{filepath.Join(envDir, "bin", "python"), "-I", "-m", python.HarnessModule}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no process runs %q: %s", want, se.String())
		}
		pid, environ := findProcess(want)
		if pid == "" {
			continue
		}
		if v := python.ProtocolFDVar + "=" + strconv.Itoa(invoke.ProtocolFD); !slices.Contains(environ, v) {
			t.Fatalf("the harness (pid %s) was not handed its channel: its environment %q lacks %s", pid, environ, v)
		}
		fd1, err1 := os.Readlink("/proc/" + pid + "/fd/1")
		fd2, err2 := os.Readlink("/proc/" + pid + "/fd/2")
		if err1 != nil || err2 != nil || fd1 != fd2 {
			t.Fatalf("the harness's fd 1 is %q (%v), its fd 2 %q (%v): want fd 1 on stderr", fd1, err1, fd2, err2)
		}
		break
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the run: %v: %s", err, se.String())
	}
}

// findProcess returns the pid and initial environment of a process whose
// command line is argv, "" when there is none.
func findProcess(argv []string) (string, []string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !slices.Equal(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), argv) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			return e.Name(), []string{"unreadable: " + err.Error()}
		}
		return e.Name(), strings.Split(strings.TrimSuffix(string(env), "\x00"), "\x00")
	}
	return "", nil
}

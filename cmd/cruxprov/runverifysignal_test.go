package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
	const python = "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s", python)
	}
	base := testdir.New(t) // its envs are read-only: the unprivileged CI pass must remove them
	w := newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	home, keys := filepath.Join(base, "home"), filepath.Join(base, "keys")
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
	envPath := v.ChangeSet.Spec.Changes[0].Provider.Materializations[0].Path
	os.MkdirAll(keys, 0o700)
	run("key", "generate", "--out", filepath.Join(keys, "alice"))
	run("key", "trust", filepath.Join(keys, "alice.pub"), "--name", "alice")
	run("changeset", "approve", v.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "alice.key"))

	in, tok := filepath.Join(base, "in.json"), filepath.Join(base, "tok")
	os.WriteFile(in, []byte(`{"seconds": 0}`), 0o644)
	os.WriteFile(tok, []byte("s3cr3t"), 0o600)
	ledger := filepath.Join(base, "ledger", "l.jsonl")
	args := []string{"--home", home, "run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@" + tok, "--ledger", ledger}
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", envPath + ".seal.json",
		"-e", "trace=openat,open", "-e", "inject=openat,open:signal=SIGINT:when=1", bin}, args...)...)
	cmd.Env = env
	r = runCmd(t, cmd)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "error: interrupted by a signal") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("interrupted in its verify: %+v", r)
	}
	if b, err := os.ReadFile(ledger); len(b) > 0 {
		t.Fatalf("interrupted in its verify, the run recorded (%v):\n%s", err, b)
	}
	run("run", "acme-echo", "sleep", "--input", in, "--secret", "acme/api-token=@"+tok, "--ledger", ledger)
	list := run("receipts", "list", "--ledger", ledger, "--json")
	var l struct {
		Attempts []struct {
			Outcome *struct{ Status string } `json:"outcome"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(list.stdout), &l); err != nil || len(l.Attempts) != 1 || l.Attempts[0].Outcome == nil || l.Attempts[0].Outcome.Status != "ok" {
		t.Fatalf("the run again: %v: %s", err, list.stdout)
	}
}

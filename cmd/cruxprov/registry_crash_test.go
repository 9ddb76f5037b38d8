package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// straceOrSkip returns strace's path, or skips: the registry crash tests
// fail and kill the real binary at one syscall with strace's fault
// injection.
func straceOrSkip(t *testing.T) string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (.ci/apt-packages lists it): no way to fail or kill the process at one syscall")
	}
	return strace
}

// proposedHome is a home whose registry trusts alice (the root, threshold
// 1) and holds one proposed change-set of acme-echo, and alice's key
// file; env is the environment the binary runs in (the key's password).
func proposedHome(t *testing.T) (home, id, key string, env []string) {
	t.Helper()
	home = t.TempDir()
	env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(home, "state"))
	key = filepath.Join(home, "alice")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	run("key", "generate", "--out", key)
	run("key", "trust", key+".pub", "--name", "alice")
	return home, proposeEcho(t, home), key + ".key", env
}

// proposeEcho proposes acme-echo 1.0 in home's registry (install's
// proposal, without building an env) and returns the change-set's id.
func proposeEcho(t *testing.T, home string) string {
	t.Helper()
	d, err := registry.OpenDir(context.Background(), filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(context.Background(), registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	return cs.Metadata.ID.String()
}

// changeSetState is the state `changeset show` gives the change-set id.
func changeSetState(t *testing.T, home, id string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "--home", home, "changeset", "show", id, "--json")
	cmd.Env = env
	r := runCmd(t, cmd)
	var v struct {
		Status struct{ State string } `json:"status"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
		t.Fatalf("changeset show: %+v", r)
	}
	return v.Status.State
}

// TestApproveFailedDirSyncSaysWhatHappened fails the fsync of the
// registry's directory that follows the rename of the journal (the
// commit point of a mutation) during `changeset approve`, with EIO and
// with ENOSPC. The command failed saying it could not record the change,
// and the next command that opened the registry applied it: the pin was
// accepted by an approval its approver was told had failed. Now a
// command that fails says what the registry holds: not recorded, and the
// change-set is still proposed (the same approve then completes).
func TestApproveFailedDirSyncSaysWhatHappened(t *testing.T) {
	strace := straceOrSkip(t)
	for _, errno := range []string{"EIO", "ENOSPC"} {
		t.Run(errno, func(t *testing.T) {
			home, id, key, env := proposedHome(t)
			reg := filepath.Join(home, "registry")
			approve := []string{"--home", home, "changeset", "approve", id, "--key", key}
			// -P: only the fsyncs of the registry's own directory; the
			// first is the journal's (strace counts per thread, but a
			// failed one ends the mutation).
			cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", reg,
				"-e", "trace=fsync", "-e", "inject=fsync:error=" + errno + ":when=1", bin}, approve...)...)
			cmd.Env = env
			r := runCmd(t, cmd)
			if r.code == 0 {
				t.Fatalf("the approve ran through with the registry's fsync failed: %+v", r)
			}
			state := changeSetState(t, home, id, env)
			if strings.Contains(r.stderr, "cannot record") && state != registry.StateProposed {
				t.Fatalf("the approve said %q, and the next command found the change-set %s", strings.TrimSpace(r.stderr), state)
			}
			if state == registry.StateProposed {
				cmd = exec.Command(bin, approve...)
				cmd.Env = env
				if r := runCmd(t, cmd); r.code != 0 {
					t.Fatalf("the same approve again: %+v", r)
				}
			}
			if state := changeSetState(t, home, id, env); state != registry.StateApproved {
				t.Fatalf("after the approve again: %s", state)
			}
			if tmp, _ := filepath.Glob(filepath.Join(reg, "*", ".tmp-*")); len(tmp) > 0 {
				t.Errorf("temp files left: %v", tmp)
			}
		})
	}
}

// TestApproveKilledAtEachWrite kills `changeset approve` (SIGKILL, strace)
// at each write of its commit that names a file of its own: the
// journal's rename, the change-set's, the pin's, the history's append
// and the journal's removal. Each time the registry opens with the
// change-set proposed or approved, never between (no approved change-set
// without its pin), and the same approve, run again as an operator who
// does not know how far it got, completes. Killed past the commit point
// (the journal's rename), the next command finished the approval, and the
// approve run again refused changeset_invalid ("approved, not
// proposed"), whose remedy, proposing again, was refused too ("already
// approved"): an approver could not tell that the approval had been made.
func TestApproveKilledAtEachWrite(t *testing.T) {
	strace := straceOrSkip(t)
	points := []struct{ syscall, path string }{
		{"renameat,rename,renameat2", "journal.json"},
		{"renameat,rename,renameat2", "changesets/%s.yaml"},
		{"renameat,rename,renameat2", "pins/acme-echo.json"},
		{"pwrite64,write", "log.jsonl"},
		{"unlinkat,unlink", "journal.json"},
	}
	for _, p := range points {
		t.Run(p.syscall[:strings.IndexByte(p.syscall, ',')]+"/"+strings.Replace(filepath.Base(p.path), "%s", "ID", 1), func(t *testing.T) {
			home, id, key, env := proposedHome(t)
			reg := filepath.Join(home, "registry")
			path := filepath.Join(reg, p.path)
			if strings.Contains(path, "%s") {
				path = strings.Replace(path, "%s", strings.TrimPrefix(id, "sha256:"), 1)
			}
			approve := []string{"--home", home, "changeset", "approve", id, "--key", key}
			cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", path,
				"-e", "trace=" + p.syscall, "-e", "inject=" + p.syscall + ":signal=SIGKILL:when=1", bin}, approve...)...)
			cmd.Env = env
			if r := runCmd(t, cmd); r.code == 0 {
				t.Fatalf("the approve was not killed at %s of %s: %+v", p.syscall, p.path, r)
			}
			d, err := registry.OpenDir(context.Background(), reg)
			if err != nil {
				t.Fatalf("open after the kill: %v", err)
			}
			state := changeSetState(t, home, id, env)
			_, perr := d.Pin(context.Background(), "acme-echo")
			if (state == registry.StateApproved) != (perr == nil) || state != registry.StateApproved && state != registry.StateProposed {
				t.Fatalf("after the kill: change-set %s, pin %v", state, perr)
			}
			cmd = exec.Command(bin, append(approve, "--json")...)
			cmd.Env = env
			r := runCmd(t, cmd)
			var v struct{ Accepted bool }
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || !v.Accepted {
				t.Fatalf("killed with the change-set %s; the same approve again: %+v", state, r)
			}
			if pin, err := d.Pin(context.Background(), "acme-echo"); err != nil || pin.Revision != 1 || len(pin.Approvals) != 1 {
				t.Fatalf("the pin after the approve again: %+v %v", pin, err)
			}
		})
	}
}

// TestRejectKilledAfterCommit kills `changeset reject` (SIGKILL, strace)
// at the change-set's rename and at the journal's removal, both past the
// commit point: the next command finishes the rejection, and the same
// reject run again completes, where it refused changeset_invalid
// ("rejected, not proposed") with a remedy, proposing again, that undoes
// what the operator asked for. Another reason is still refused: the
// history keeps the first.
func TestRejectKilledAfterCommit(t *testing.T) {
	strace := straceOrSkip(t)
	for _, p := range []struct{ syscall, path string }{
		{"renameat,rename,renameat2", "changesets/%s.yaml"},
		{"unlinkat,unlink", "journal.json"},
	} {
		t.Run(p.syscall[:strings.IndexByte(p.syscall, ',')], func(t *testing.T) {
			home, id, _, env := proposedHome(t)
			path := filepath.Join(home, "registry", strings.Replace(p.path, "%s", strings.TrimPrefix(id, "sha256:"), 1))
			reject := []string{"--home", home, "changeset", "reject", id, "--reason", "egress to an unknown host"}
			cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", path,
				"-e", "trace=" + p.syscall, "-e", "inject=" + p.syscall + ":signal=SIGKILL:when=1", bin}, reject...)...)
			cmd.Env = env
			if r := runCmd(t, cmd); r.code == 0 {
				t.Fatalf("the reject was not killed: %+v", r)
			}
			if state := changeSetState(t, home, id, env); state != registry.StateRejected {
				t.Fatalf("killed past the commit point: %s", state)
			}
			cmd = exec.Command(bin, reject...)
			cmd.Env = env
			if r := runCmd(t, cmd); r.code != 0 {
				t.Fatalf("the same reject again: %+v", r)
			}
			cmd = exec.Command(bin, append(reject[:len(reject)-1], "another reason")...)
			cmd.Env = env
			if r := runCmd(t, cmd); r.code != exitRefused || !strings.Contains(r.stderr, "changeset_invalid") {
				t.Fatalf("a reject with another reason: %+v", r)
			}
		})
	}
}

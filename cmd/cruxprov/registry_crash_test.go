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
	d, err := registry.OpenDir(context.Background(), filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := d.Propose(context.Background(), registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	return home, cs.Metadata.ID.String(), key + ".key", env
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

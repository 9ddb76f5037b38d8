package registry_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/asuser"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
)

// crashChildEnv carries a crash case to TestCrashChild:
// "MUTATION,STEP,N,REGISTRY,ROOTKEYHEX[,BOBKEYHEX]".
const crashChildEnv = "CRUXPROV_TEST_REGISTRY_CRASH"

func newECDSA(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(ek)
	if err != nil {
		t.Fatal(err)
	}
	return ek, hex.EncodeToString(der)
}

func parseECDSA(t *testing.T, s string) *ecdsa.PrivateKey {
	t.Helper()
	der, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := x509.ParseECPrivateKey(der)
	if err != nil {
		t.Fatal(err)
	}
	return ek
}

// TestMutationCrashes kills a process (SIGKILL, for real) at each step of
// a mutation's commit — after the journal, after each file, in the middle
// of the history append, after it — for the three mutations that write
// more than one file: the root of trust, an approval that accepts a pin
// (change-set, pin, two history entries) and one that trusts a key
// (trust state, change-set, history). Each time, the next process that
// opens the registry finishes the change: the state is the one after the
// mutation, whole, the history verifies, no temp file is left, and the
// registry goes on (a verifier with a floor, the next approval).
// Before the journal, the first two left a registry every verifier
// refused, and the approval a change-set marked approved with no pin,
// which no new proposal could replace.
func TestMutationCrashes(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		step string
		n    int
	}{{"journal", 1}, {"file", 1}, {"file", 2}, {"file", 3}, {"history-torn", 1}, {"history", 1}}
	for _, mutation := range []string{"root", "approve", "trust"} {
		for _, s := range steps {
			t.Run(fmt.Sprintf("%s/%s#%d", mutation, s.step, s.n), func(t *testing.T) {
				root, rootHex := newECDSA(t)
				bob, bobHex := newECDSA(t)
				rk, bk := registrytest.KeyFrom(t, "root", registry.RoleApprover, root), registrytest.KeyFrom(t, "bob", registry.RoleApprover, bob)
				regRoot := filepath.Join(t.TempDir(), "registry")
				state := t.TempDir() // the verifier's floor
				d, err := registry.OpenDir(ctx, regRoot)
				if err != nil {
					t.Fatal(err)
				}
				if mutation != "root" {
					if _, err := d.TrustKey(ctx, rk.Key, "t"); err != nil {
						t.Fatal(err)
					}
					for _, v := range []string{"1.0", "2.0"} {
						cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", v), "t")
						if err != nil {
							t.Fatal(err)
						}
						if _, err := d.Approve(ctx, cs.Metadata.ID, rk.Priv, nil); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				before := int64(-1)
				if tr, err := d.Trust(ctx); err == nil && tr != nil {
					before = tr.Revision
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), crashChildEnv+"="+strings.Join([]string{mutation, s.step, strconv.Itoa(s.n), regRoot, rootHex, bobHex}, ","))
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					if err == nil && strings.Contains(string(out), "step not reached") {
						t.Skipf("%s has no %s #%d", mutation, s.step, s.n)
					}
					t.Fatalf("the child was not killed: %v\n%s", err, out)
				}
				if _, err := os.Stat(filepath.Join(regRoot, "journal.json")); err != nil {
					t.Fatalf("killed after the commit point, no journal: %v", err)
				}

				// The next process to open it finishes the change.
				d, err = registry.OpenDir(ctx, regRoot)
				if err != nil {
					t.Fatalf("open after the crash: %v", err)
				}
				if _, err := os.Stat(filepath.Join(regRoot, "journal.json")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the journal is still there: %v", err)
				}
				for _, dir := range []string{regRoot, filepath.Join(regRoot, "pins"), filepath.Join(regRoot, "changesets")} {
					if tmp, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(tmp) > 0 {
						t.Errorf("temp files left: %v", tmp)
					}
				}
				if _, err := d.Chain(ctx); err != nil {
					t.Fatalf("history: %v", err)
				}
				tr, err := d.Trust(ctx)
				if err != nil || tr == nil {
					t.Fatalf("trust: %v %v", tr, err)
				}
				switch mutation {
				case "root":
					if tr.Root.Digest != rk.Key.Digest {
						t.Fatalf("root of trust %v", tr.Root.Digest)
					}
					if _, err := d.TrustKey(ctx, bk.Key, "t"); err != nil {
						t.Fatalf("the next trust: %v", err)
					}
					return
				case "approve":
					p, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now())
					if err != nil || p.Revision != 3 {
						t.Fatalf("verify: %+v %v", p, err)
					}
				case "trust":
					if len(tr.Keys) != 2 || tr.Revision != before+1 {
						t.Fatalf("trust revision %d, keys %+v", tr.Revision, tr.Keys)
					}
					if _, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil {
						t.Fatalf("verify: %v", err)
					}
				}
				// And it goes on: the next version, approved by bob (trusted
				// by the crashed mutation, or by root now).
				if mutation == "approve" {
					res, err := d.TrustKey(ctx, bk.Key, "t")
					if err != nil {
						t.Fatal(err)
					}
					if _, err := d.Approve(ctx, res.ChangeSet.Metadata.ID, rk.Priv, nil); err != nil {
						t.Fatal(err)
					}
				}
				cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "9.0"), "t")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := d.Approve(ctx, cs.Metadata.ID, bk.Priv, nil); err != nil {
					t.Fatal(err)
				}
				if p, err := registry.VerifyPin(ctx, d, state, "acme-echo", time.Now()); err != nil || p.Revision < 3 {
					t.Fatalf("verify after the next approval: %+v %v", p, err)
				}
			})
		}
	}
}

// TestCrashChild is the process TestMutationCrashes kills: it makes the
// one mutation of its case and dies (SIGKILL) at the step named.
func TestCrashChild(t *testing.T) {
	v := os.Getenv(crashChildEnv)
	if v == "" {
		t.Skip("TestMutationCrashes runs it")
	}
	f := strings.Split(v, ",")
	mutation, stepName, regRoot := f[0], f[1], f[3]
	n, _ := strconv.Atoi(f[2])
	ctx := context.Background()
	rk, bk := registrytest.KeyFrom(t, "root", registry.RoleApprover, parseECDSA(t, f[4])), registrytest.KeyFrom(t, "bob", registry.RoleApprover, parseECDSA(t, f[5]))
	d, err := registry.OpenDir(ctx, regRoot)
	if err != nil {
		t.Fatal(err)
	}
	var id digest.Digest
	switch mutation {
	case "approve":
		cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
		if err != nil {
			t.Fatal(err)
		}
		id = cs.Metadata.ID
	case "trust":
		res, err := d.TrustKey(ctx, bk.Key, "t")
		if err != nil {
			t.Fatal(err)
		}
		id = res.ChangeSet.Metadata.ID
	}
	seen := 0
	registry.SetCrashAt(func(s string) error {
		if s == stepName {
			if seen++; seen == n {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
		return nil
	})
	defer registry.SetCrashAt(nil)
	if mutation == "root" {
		_, err = d.TrustKey(ctx, rk.Key, "t")
	} else {
		_, err = d.Approve(ctx, id, rk.Priv, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("step not reached")
}

// TestUnfinishedChangeForAReader: a verifier that may not write the
// registry (an executor that is not the operator) and finds a change
// left unfinished refuses (registry_corrupt) and says who finishes it,
// rather than read half of it; the owner's next command finishes it.
func TestUnfinishedChangeForAReader(t *testing.T) {
	if os.Getenv(readerChildEnv) != "" {
		unfinishedReader(t, os.Getenv(readerChildEnv))
		return
	}
	asuser.Require(t, "run as a user who may not write the registry")
	ctx := context.Background()
	work := asuser.Dir(t, "cruxprov-registry-journal-")
	d := acceptedRegistry(t, work)
	// An unfinished approval: its journal names a pin at a revision the
	// pin file has not reached yet.
	journal := fmt.Sprintf(`{"format":%q,"log_size":0,"log":"","files":[]}`, registry.JournalFormat)
	if err := os.WriteFile(filepath.Join(d.Root(), "journal.json"), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := asuser.CopySelf(t, work)
	cmd := asuser.Command(65534, 65534, bin, "-test.run=^TestUnfinishedChangeForAReader$", "-test.v", "-test.count=1")
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/bin:/bin", readerChildEnv + "=" + d.Root()}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnfinishedChangeForAReader") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	// The owner opens it: finished (an empty journal here), and verify works.
	if d, err = registry.OpenDir(ctx, d.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.VerifyPin(ctx, d, t.TempDir(), "acme-echo", time.Now()); err != nil {
		t.Fatal(err)
	}
}

const readerChildEnv = "CRUXPROV_TEST_REGISTRY_READER"

func unfinishedReader(t *testing.T, root string) {
	ctx := context.Background()
	for name, open := range map[string]func(context.Context, string) (*registry.Dir, error){"OpenDir": registry.OpenDir, "OpenDirReadOnly": registry.OpenDirReadOnly} {
		_, err := open(ctx, root)
		wantRefusal(t, err, refusal.RegistryCorrupt)
		if r := refusal.RemedyOf(err); !strings.Contains(err.Error(), "interrupted") || !strings.Contains(err.Error(), "the registry's owner finishes it") || r == nil || r.Action != refusal.ActionRepairRegistry {
			t.Errorf("%s: does not say what happened and who finishes it (with a repair_registry remedy): %v (%+v)", name, err, r)
		}
		// The lock is 0644 and a reader takes it read-only: that it
		// could not open it for writing is no cause of anything (it
		// ended the message, ": open …/.lock: permission denied").
		if strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), ".lock") {
			t.Errorf("%s: a cause that is not one: %v", name, err)
		}
	}
}

// TestMutationFailsAfterCommit: a write that fails once the journal is in
// place (the disk full by then, ENOSPC, at the pin) does not leave half a
// change either: the approval says the change is recorded and finished by
// the next command, and the next open, with the disk writable again,
// finishes it whole (a reader that cannot write meanwhile refuses:
// TestUnfinishedChangeForAReader).
func TestMutationFailsAfterCommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	cs, _, err := f.dir.Propose(ctx, registrytest.Change("acme-echo", "3.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	registry.SetCrashAt(func(s string) error {
		if s == "file" {
			if files++; files == 1 {
				return syscall.ENOSPC
			}
		}
		return nil
	})
	_, err = f.dir.Approve(ctx, cs.Metadata.ID, f.root.Priv, nil)
	registry.SetCrashAt(nil)
	if !errors.Is(err, syscall.ENOSPC) || refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "but not all written") {
		t.Fatalf("the approval: %v, want registry_write_failed: recorded, not all written", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir.Root(), "journal.json")); err != nil {
		t.Fatalf("no journal after the failed write: %v", err)
	}
	// An open while the disk is still full cannot finish it: that is the
	// full disk, registry_write_failed, not registry_corrupt (whose
	// advice is to restore the registry from a trusted copy).
	registry.SetCrashAt(func(s string) error {
		if s == "file" {
			return syscall.ENOSPC
		}
		return nil
	})
	_, err = registry.OpenDir(ctx, f.dir.Root())
	registry.SetCrashAt(nil)
	if !errors.Is(err, syscall.ENOSPC) || refusal.CodeOf(err) != refusal.RegistryWriteFailed || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("open on a full disk: %v (code %q)", err, refusal.CodeOf(err))
	}
	d, err := registry.OpenDir(ctx, f.dir.Root())
	if err != nil {
		t.Fatalf("open after the failed write: %v", err)
	}
	p, err := registry.VerifyPin(ctx, d, f.state, "acme-echo", time.Now())
	if err != nil || p.Revision != 3 {
		t.Fatalf("verify: %+v %v", p, err)
	}
	if st, err := d.ChangeSet(ctx, cs.Metadata.ID); err != nil || st.Status.State != registry.StateApproved {
		t.Fatalf("the change-set: %+v %v", st, err)
	}
}

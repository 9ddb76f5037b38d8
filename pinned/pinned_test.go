package pinned_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/index"
	"github.com/cruxible/cruxprov/install"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/invoke"
	"github.com/cruxible/cruxprov/pinned"
	"github.com/cruxible/cruxprov/pipeline/pipelinetest"
	"github.com/cruxible/cruxprov/python"
	"github.com/cruxible/cruxprov/receipts"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/store"
	"github.com/cruxible/cruxprov/verify"
)

// interpreter is the one the env is sealed on: Debian's, which root and
// cruxprov-rootless (who cannot read /root's pyenv) can both run.
const interpreter = "/usr/bin/python3.11"

// world is a store with acme-hostile (whose dependency acme-startup has
// a .pth file that runs at interpreter start) installed for the host and
// approved, a ledger and an executor's state directory.
type world struct {
	home   string
	reg    *registry.Dir
	st     *store.Store
	ledger *receipts.Ledger
	path   string // the ledger's
	state  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if _, err := os.Stat(interpreter); err != nil {
		t.Skipf("needs %s", interpreter)
	}
	ctx := context.Background()
	dir := testdir.New(t)
	fx := filepath.Join(dir, "fx")
	set, err := fixtures.Build(fx, fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := fixtures.BuildHostile(fx, set.Runtime, fixtures.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "index")
	if _, err := index.Build(ctx, idx, filepath.Dir(prov.Path)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
	t.Cleanup(srv.Close)
	client, err := index.New(srv.URL+"/simple/", index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{home: filepath.Join(dir, "home"), state: filepath.Join(dir, "state"), path: filepath.Join(dir, "receipts.jsonl")}
	if w.st, err = store.Open(w.home); err != nil {
		t.Fatal(err)
	}
	if w.reg, err = registry.OpenDir(ctx, filepath.Join(w.home, "registry")); err != nil {
		t.Fatal(err)
	}
	key := registrytest.NewKey(t, "alice", registry.RoleApprover)
	if _, err := w.reg.TrustKey(ctx, key.Key, "test"); err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(filepath.Join(fx, "interfaces", "acme.hostile.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.reg.RegisterInterface(ctx, "acme.hostile", schema); err != nil {
		t.Fatal(err)
	}
	res, err := install.Install(ctx, w.st, w.reg, install.Options{
		Root: pipelinetest.OpenRoot(t, w.st, prov.Path), Platforms: []string{"host"},
		Python: interpreter, NoCompile: true, Client: client,
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := w.reg.Approve(ctx, res.ChangeSet.Metadata.ID, key.Priv, nil); err != nil || !a.Accepted {
		t.Fatalf("approve: %+v %v", a, err)
	}
	if w.ledger, err = receipts.Open(ctx, w.path, receipts.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.ledger.Close() })
	return w
}

// secrets resolves acme-hostile's declared secrets.
func secrets(_ context.Context, ref string) (string, error) {
	if !slices.Contains(fixtures.HostileSecrets, ref) {
		return "", fmt.Errorf("no value for %s", ref)
	}
	return "value of " + ref, nil
}

func (w *world) request(ep string, input string) pinned.Request {
	return pinned.Request{
		Provider: fixtures.HostileName, Entrypoint: ep, Input: json.RawMessage(input),
		Resolve: secrets, Verify: verify.Options{StateDir: w.state},
	}
}

func (w *world) local() pinned.Local {
	return pinned.Local{Home: w.home, Executor: invoke.Subprocess{Ledger: w.ledger}}
}

// TestStartupCodeCannotWriteTheResult: a provider whose env has start-up
// code (acme-startup's .pth file) that prints, writes on fd 1 itself and
// forges a result there returns its own result through the library, the
// .pth having seen fd 1 on stderr: the call is built with the runtime of
// the env's sealed resolution (Call.Runtime), which puts the protocol
// channel on a descriptor of its own. The documented Go API's call
// (docs/executor.md before this package) set no Runtime: the channel was
// fd 1, what the .pth wrote went into it, and the run was a
// protocol_error.
func TestStartupCodeCannotWriteTheResult(t *testing.T) {
	w := newWorld(t)
	req := w.request("startup", "{}")
	req.Environ, req.Allow = []string{"ACME_STARTUP=print,write,forge", "OTHER=x"}, []string{"ACME_STARTUP"}
	res, err := pinned.Run(context.Background(), w.reg, req, w.local())
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != invoke.StatusOK {
		t.Fatalf("status %s %+v (exit %d, %d bytes on stdout), want ok: the .pth's writes reached the result channel", res.Status, res.Error, res.ExitCode, res.StdoutBytes)
	}
	var got struct {
		PthRan []string `json:"pth_ran"`
	}
	if err := json.Unmarshal(res.Value, &got); err != nil {
		t.Fatalf("result %s: %v", res.Value, err)
	}
	if len(got.PthRan) == 0 {
		t.Fatalf("acme_startup.pth did not run: %s", res.Value)
	}
	for _, fd1 := range got.PthRan {
		if fd1 != "stderr" {
			t.Errorf("when acme_startup.pth ran, fd 1 was %s (%q): the channel was not off fd 1", fd1, got.PthRan)
		}
	}
	if bytes.Contains(res.Value, []byte("forged")) {
		t.Errorf("the forged result came back: %s", res.Value)
	}
	// What the run's receipt says is the result returned.
	sr, err := receipts.Scan(context.Background(), []string{w.path}, receipts.ScanOptions{})
	if err != nil || len(sr.Attempts) != 1 || sr.Attempts[0].Outcome == nil || sr.Attempts[0].Outcome.Status != receipts.StatusOK {
		t.Fatalf("ledger: %+v %v", sr, err)
	}
}

// TestCallSetsTheRuntime: the exported conversion an executor that
// verifies once and watches uses sets Call.Runtime from the env's sealed
// resolution, and what Run runs.
func TestCallSetsTheRuntime(t *testing.T) {
	w := newWorld(t)
	req := w.request("startup", "{}")
	req.Verify.Entrypoint = "startup"
	rep, err := verify.Verify(context.Background(), w.reg, req.Provider, req.Verify)
	if err != nil {
		t.Fatal(err)
	}
	c := pinned.Call(rep, req)
	if c == nil || c.Runtime == "" || c.Runtime != python.RuntimeOf(rep.Seal.Seal.Resolution.Packages) {
		t.Fatalf("Call: %+v, want Runtime %q", c, python.RuntimeOf(rep.Seal.Seal.Resolution.Packages))
	}
	if c.Env != rep.Env || c.Python == "" || c.SealDigest != rep.Materialization.Seal || c.Object == "" || c.Verify != nil {
		t.Errorf("Call: %+v", c)
	}
	if pinned.Call(&verify.Report{Provider: req.Provider}, req) != nil {
		t.Errorf("Call of a report that names no env: want nil")
	}
}

// TestCallIsTheRequestsEntrypoint: one verification serves every
// entrypoint of the provider (an executor that watches verifies once for
// all of them): Call builds the call of req's entrypoint, as the pin has
// it, whichever one the report was verified with, or none. It took the
// report's: a report verified for startup built a call of probe that ran
// startup's object, recorded under probe with startup's implementation
// digest; a report verified without one built none.
func TestCallIsTheRequestsEntrypoint(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	byName := func(rep *verify.Report, name string) *registry.Entrypoint {
		for i := range rep.Spec.Entrypoints {
			if rep.Spec.Entrypoints[i].Name == name {
				return &rep.Spec.Entrypoints[i]
			}
		}
		t.Fatalf("the pin has no entrypoint %s", name)
		return nil
	}
	for _, verified := range []string{"startup", ""} {
		rep, err := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{Entrypoint: verified, StateDir: w.state})
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range []string{"probe", "startup"} {
			c := pinned.Call(rep, w.request(ep, "{}"))
			want := byName(rep, ep)
			if c == nil || c.Entrypoint != ep || c.Object != want.Object || c.ImplementationDigest != want.ImplementationDigest {
				t.Errorf("verified for %q, the call of %s: %+v, want object %s and digest %s", verified, ep, c, want.Object, want.ImplementationDigest)
			}
		}
		if c := pinned.Call(rep, w.request("nonesuch", "{}")); c != nil {
			t.Errorf("verified for %q, the call of an entrypoint the pin has not: %+v, want nil", verified, c)
		}
	}
	// Run on a report so built runs the entrypoint asked for: probe
	// reports its argv and environment, startup does not.
	rep, err := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{Entrypoint: "startup", StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	c := pinned.Call(rep, w.request("probe", "{}"))
	res, err := (&invoke.Subprocess{Ledger: w.ledger}).Run(ctx, c)
	if err != nil || res.Status != invoke.StatusOK || !strings.Contains(string(res.Value), "argv") {
		t.Fatalf("probe on a report verified for startup: %+v %v", res, err)
	}
}

// TestStoreHeldForTheRun: the store's lock is held shared while the
// provider runs (a gc, which takes it exclusive, cannot have it then:
// gc --envs would remove the env under the run), and released when Run
// returns.
func TestStoreHeldForTheRun(t *testing.T) {
	w := newWorld(t)
	token := fmt.Sprintf("pinned-held-%d", time.Now().UnixNano())
	req := w.request("term", fmt.Sprintf(`{"token": %q}`, token))
	req.Limits = invoke.Budgets{TimeoutMS: 120_000}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := pinned.Run(ctx, w.reg, req, w.local())
		done <- err
	}()
	// The provider is running once a process carries the token.
	deadline := time.Now().Add(60 * time.Second)
	for !running(token) {
		select {
		case err := <-done:
			t.Fatalf("Run returned before its provider was seen running: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the provider was not seen running within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if unlock, ok, err := w.st.TryLockExclusive(); err != nil || ok {
		if ok {
			unlock()
		}
		t.Fatalf("TryLockExclusive while the provider runs: ok=%v err=%v, want refused (the run holds the store)", ok, err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	unlock, ok, err := w.st.TryLockExclusive()
	if err != nil || !ok {
		t.Fatalf("TryLockExclusive after the run: ok=%v err=%v, want taken", ok, err)
	}
	unlock()
}

// running reports whether a process of this user has token on its argv.
func running(token string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(token)) && !bytes.Contains(b, []byte("pinned.test")) {
			return true
		}
	}
	return false
}

// TestWaitsForGC: a run that finds the store held exclusive (a gc) says
// so through OnWait, waits, and runs once the gc is done.
func TestWaitsForGC(t *testing.T) {
	w := newWorld(t)
	unlock, ok, err := w.st.TryLockExclusive()
	if err != nil || !ok {
		t.Fatalf("TryLockExclusive: %v %v", ok, err)
	}
	var waited atomic.Int32
	lo := w.local()
	lo.OnWait = func(wt store.Wait, _ []int) {
		if wt == store.WaitForGC {
			waited.Add(1)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := pinned.Run(context.Background(), w.reg, w.request("startup", "{}"), lo)
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for waited.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if waited.Load() != 1 {
		t.Fatalf("OnWait said WaitForGC %d times, want once", waited.Load())
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned while the store was held exclusive: %v", err)
	default:
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutBoundsTheStoreWait: a run with a timeout (the caller's
// --timeout) that cannot take the store within it (a gc holds it) gives
// up then, saying so (a *store.WaitError past its deadline, naming the
// timeout), and runs and records nothing; it waited for ever past its
// --timeout.
func TestTimeoutBoundsTheStoreWait(t *testing.T) {
	w := newWorld(t)
	unlock, ok, err := w.st.TryLockExclusive()
	if err != nil || !ok {
		t.Fatalf("TryLockExclusive: %v %v", ok, err)
	}
	defer unlock()
	req := w.request("startup", "{}")
	req.Limits = invoke.Budgets{TimeoutMS: 300}
	done := make(chan error, 1)
	go func() {
		_, err := pinned.Run(context.Background(), w.reg, req, w.local())
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("a run with a 300ms timeout still waits for the store after 60s")
	}
	var we *store.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the run's timeout, 300ms") || !strings.Contains(err.Error(), "the provider did not run") {
		t.Fatalf("want the bounded wait's error, got %v", err)
	}
	if fi, err := os.Stat(w.path); err == nil && fi.Size() > 0 {
		if rows, _ := os.ReadFile(w.path); bytes.Contains(rows, []byte(`"intent"`)) {
			t.Errorf("a run that never took the store wrote %s", rows)
		}
	}
}

// TestRefusals: a verification refused before the pin names the env is
// a *pinned.VerifyError that keeps its code and writes no receipt; one
// refused after (the env drifted) is recorded, an
// *invoke.RecordedRefusal.
func TestRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	req := w.request("nonesuch", "{}")
	_, err := pinned.Run(ctx, w.reg, req, w.local())
	var ve *pinned.VerifyError
	if !errors.As(err, &ve) || refusal.CodeOf(err) != refusal.EntrypointUnknown {
		t.Fatalf("unknown entrypoint: %v, want a *pinned.VerifyError entrypoint_unknown", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNameEntrypoint || r.Target != "nonesuch" {
		t.Errorf("unknown entrypoint: remedy %+v, want %s of nonesuch", r, refusal.ActionNameEntrypoint)
	}
	// No entrypoint named: the verification passes without one, and Run
	// returned a *VerifyError whose Err was nil (no code, and its Error
	// method panicked).
	_, err = pinned.Run(ctx, w.reg, w.request("", "{}"), w.local())
	if !errors.As(err, &ve) || ve.Err == nil || refusal.CodeOf(err) != refusal.EntrypointUnknown {
		t.Fatalf("no entrypoint: %#v, want a *pinned.VerifyError entrypoint_unknown", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "startup") {
		t.Errorf("no entrypoint: %q does not name the pin's entrypoints", msg)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNameEntrypoint {
		t.Errorf("no entrypoint: remedy %+v, want %s", r, refusal.ActionNameEntrypoint)
	}
	req = w.request("startup", "{}")
	req.Provider = "acme-nonesuch"
	if _, err := pinned.Run(ctx, w.reg, req, w.local()); !errors.As(err, &ve) || refusal.CodeOf(err) != refusal.PinUnapproved {
		t.Fatalf("no pin: %v, want a *pinned.VerifyError pin_unapproved", err)
	}
	if fi, err := os.Stat(w.path); err != nil || fi.Size() != 0 {
		t.Fatalf("the ledger after refusals before the pin named the env: %v %v, want empty", fi, err)
	}
	// The env drifts: a file added.
	req = w.request("startup", "{}")
	rep, err := verify.Verify(ctx, w.reg, req.Provider, verify.Options{StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(rep.Env, 0o755)
	if err := os.WriteFile(filepath.Join(rep.Env, "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var pinSeen *registry.Provider
	req.OnPin = func(spec *registry.Provider) { pinSeen = spec }
	_, err = pinned.Run(ctx, w.reg, req, w.local())
	var rr *invoke.RecordedRefusal
	if !errors.As(err, &rr) || refusal.CodeOf(err) != refusal.EnvDrift || errors.As(err, &ve) {
		t.Fatalf("drifted env: %v, want a recorded env_drift", err)
	}
	if pinSeen == nil || pinSeen.Name != fixtures.HostileName {
		t.Errorf("OnPin saw %+v, want the pin's spec", pinSeen)
	}
	b, _ := os.ReadFile(w.path)
	if !strings.Contains(string(b), rr.AttemptID) || !strings.Contains(string(b), string(refusal.EnvDrift)) {
		t.Errorf("the ledger does not record the refusal of %s: %s", rr.AttemptID, b)
	}
}

// TestBwrapRefusesWithoutTheSeal: a preset asked of a report that names
// no seal is refused at once, saying why and what to do, as the
// verification would: an env whose seal is gone is seal_missing with the
// rebuild from the pin's inputs; a report whose verification stopped
// before it read a seal that is there, seal_missing. Bwrap gave the zero
// preset, nil error, and the executor learned nothing until the nil call
// was refused "there is no call to run".
func TestBwrapRefusesWithoutTheSeal(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rep, err := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := pinned.Bwrap(rep); err != nil || len(b.ReadOnly) == 0 {
		t.Fatalf("Bwrap of a verified report: %+v, %v; want the interpreter's preset", b, err)
	}
	// Verified before it read the seal: the seal is there, the report
	// names none.
	early := *rep
	early.Seal = nil
	if _, err := pinned.Bwrap(&early); refusal.CodeOf(err) != refusal.SealMissing || !strings.Contains(err.Error(), rep.Env) || !strings.Contains(err.Error(), "verify the pin again") {
		t.Errorf("Bwrap of a report without the seal it read: %v, want seal_missing naming %s", err, rep.Env)
	}
	// The seal gone: the verification's refusal, and Bwrap's.
	sealPath := rep.Env + ".seal.json"
	if _, err := os.Stat(sealPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sealPath, sealPath+".away"); err != nil {
		t.Fatal(err)
	}
	gone, verr := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{StateDir: w.state})
	if refusal.CodeOf(verr) != refusal.SealMissing {
		t.Fatalf("verify without the seal: %v, want seal_missing", verr)
	}
	if c := pinned.Call(gone, w.request("startup", "{}")); c != nil {
		t.Fatalf("Call of a report without a seal: %+v, want nil", c)
	}
	b, err := pinned.Bwrap(gone)
	if len(b.ReadOnly) != 0 || refusal.CodeOf(err) != refusal.SealMissing || err.Error() != verr.Error() {
		t.Fatalf("Bwrap without the seal: %+v, %v; want the verification's refusal, %v", b, err, verr)
	}
	rem, vrem := refusal.RemedyOf(err), refusal.RemedyOf(verr)
	if rem == nil || rem.Action != refusal.ActionRebuildEnv || rem.Target != rep.Env || rem.Package == "" || rem.Python == "" {
		t.Fatalf("Bwrap without the seal: remedy %+v, want %s of %s with the pin's inputs", rem, refusal.ActionRebuildEnv, rep.Env)
	}
	if fmt.Sprint(*rem) != fmt.Sprint(*vrem) {
		t.Errorf("Bwrap's remedy %+v, the verification's %+v", *rem, *vrem)
	}
}

// TestNoCall: NoCall says why Call is nil, as the verification would
// have: an entrypoint the pin does not have is entrypoint_unknown naming
// those it has, with the remedy that names one; none named, the same; a
// report without its seal, SealErr's refusal. An executor that builds
// its calls from a report verified earlier (docs/executor.md, "Watching
// an env") had nothing to return for a nil call but the executor's own
// "there is no call to run", and the doc's example set the nil call's
// Verify, a panic.
func TestNoCall(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rep, err := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	if err := pinned.NoCall(rep, w.request("startup", "{}")); err != nil || pinned.Call(rep, w.request("startup", "{}")) == nil {
		t.Fatalf("NoCall of an entrypoint the pin has: %v", err)
	}
	for _, ep := range []string{"nonesuch", ""} {
		req := w.request(ep, "{}")
		if pinned.Call(rep, req) != nil {
			t.Fatalf("Call of %q: not nil", ep)
		}
		err := pinned.NoCall(rep, req)
		rem := refusal.RemedyOf(err)
		if refusal.CodeOf(err) != refusal.EntrypointUnknown || !strings.Contains(err.Error(), "startup") ||
			rem == nil || rem.Action != refusal.ActionNameEntrypoint || rem.Target != ep {
			t.Errorf("NoCall of %q: %v (remedy %+v), want entrypoint_unknown naming the pin's, remedy %s of %q", ep, err, rem, refusal.ActionNameEntrypoint, ep)
		}
	}
	// As the verification of that entrypoint refuses it.
	_, verr := verify.Verify(ctx, w.reg, fixtures.HostileName, verify.Options{StateDir: w.state, Entrypoint: "nonesuch"})
	if err := pinned.NoCall(rep, w.request("nonesuch", "{}")); err == nil || verr == nil || err.Error() != verr.Error() {
		t.Errorf("NoCall: %v; the verification: %v", err, verr)
	}
	noSeal := *rep
	noSeal.Seal = nil
	for name, r := range map[string]*verify.Report{"nil": nil, "without its seal": &noSeal} {
		if err := pinned.NoCall(r, w.request("startup", "{}")); refusal.CodeOf(err) != refusal.SealMissing {
			t.Errorf("NoCall of a report %s: %v, want seal_missing", name, err)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/registry"
	"github.com/cruxible/cruxprov/registry/registrytest"
	"github.com/cruxible/cruxprov/sign"
)

// govWalkStore is approvingStore's store with a fixture world, skipped
// without the host interpreter the fixture env is built on.
func govWalkStore(t *testing.T) (base string, w *governedWorld, run, must func(args ...string) result) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
		t.Skip("needs /usr/bin/python3.11")
	}
	base = testdir.New(t)
	w = newGovernedWorld(t, base, fixtures.ForTest(t, fixtures.Options{}))
	run, must, _ = approvingStore(t, w, base, "/usr/bin/python3.11")
	return base, w, run, must
}

// csOf is the change-set id a --json proposal printed.
func csOf(t *testing.T, r result) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	cs, _ := v["changeSet"].(map[string]any)
	md, _ := cs["metadata"].(map[string]any)
	id, _ := md["id"].(string)
	if id == "" {
		t.Fatalf("no change-set in %s", r.stdout)
	}
	return id
}

func wantRefusal(t *testing.T, r result, code, what string) {
	t.Helper()
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+code+":") {
		t.Errorf("%s: want %s (exit 78): %+v", what, code, r)
	}
}

// TestGovWalkTrustPutBack: a key is untrusted (an approved change-set),
// then the trust document from before it is put back (a backup restored,
// or whoever writes the registry). Alone it replays cleanly, so the
// untrusted key's approval counted again: verify must hold the trust
// document to the governance steps the history records (DESIGN §8:
// signer_untrusted for a key no longer trusted), for a verifier that
// replayed that very document before (its floor) as for a fresh one.
func TestGovWalkTrustPutBack(t *testing.T) {
	base, w, run, must := govWalkStore(t)
	keys := filepath.Join(base, "keys")
	must("key", "generate", "--out", filepath.Join(keys, "bob"))
	bob := csOf(t, must("key", "trust", filepath.Join(keys, "bob.pub"), "--name", "bob", "--json"))
	must("changeset", "approve", bob, "--key", filepath.Join(keys, "k.key"))
	// acme-echo approved by bob alone (threshold 1).
	id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile", "--quiet").stdout)
	must("changeset", "approve", id, "--key", filepath.Join(keys, "bob.key"))
	must("verify", "acme-echo") // the executor's floor holds this trust document
	trustFile := filepath.Join(base, "home", "registry", "trust.json")
	before, err := os.ReadFile(trustFile)
	if err != nil {
		t.Fatal(err)
	}
	un := csOf(t, must("key", "untrust", "bob", "--json"))
	must("changeset", "approve", un, "--key", filepath.Join(keys, "k.key"))
	wantRefusal(t, run("verify", "acme-echo"), "signer_untrusted", "verify a pin approved by a key untrusted since")
	// provider show says so of the approval (it listed it as any other),
	// and its --json keeps the pin as the registry holds it.
	if r := must("provider", "show", "acme-echo"); !strings.Contains(r.stdout, "approved by bob (") || !strings.Contains(r.stdout, "its key is no longer trusted as an approver: it does not count") {
		t.Errorf("provider show of a pin approved by a key untrusted since: %q", r.stdout)
	}
	if r := must("provider", "show", "acme-echo", "--json"); strings.Contains(r.stdout, "no longer trusted") {
		t.Errorf("provider show --json: %q", r.stdout)
	}
	if err := os.WriteFile(trustFile, before, 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, run("verify", "acme-echo"), "registry_corrupt", "verify with the trust document from before the untrust put back")
	fresh := filepath.Join(base, "fresh-state")
	wantRefusal(t, run("verify", "acme-echo", "--state-dir", fresh), "registry_corrupt", "the same, by a verifier without a floor")
	wantRefusal(t, run("registry", "log", "--verify"), "registry_corrupt", "registry log --verify with the trust document put back")
	cmd := exec.Command(bin, "--home", filepath.Join(base, "home"), "run", "acme-echo", "echo", "--input", "-", "--state-dir", fresh)
	cmd.Stdin = strings.NewReader(`{"hello":"world"}`)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
	wantRefusal(t, runCmd(t, cmd), "registry_corrupt", "run with the trust document put back")
}

// TestGovWalkLogVerifyWithoutPins: registry log --verify says "trust
// state verified", and it must replay the trust state even when no pin
// would (none accepted yet): a second name for the root key and the
// policy written into trust.json by hand are not what any approved step
// made.
func TestGovWalkLogVerifyWithoutPins(t *testing.T) {
	home, _, run := keyedHome(t, "a")
	if r := run("registry", "log", "--verify"); r.code != 0 {
		t.Fatalf("registry log --verify: %+v", r)
	}
	tf := filepath.Join(home, "registry", "trust.json")
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ks := doc["keys"].([]any)
	k2 := map[string]any{}
	for n, v := range ks[0].(map[string]any) {
		k2[n] = v
	}
	k2["name"] = "zz"
	doc["keys"] = append(ks, k2)
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(tf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, run("registry", "log", "--verify"), "registry_corrupt", "registry log --verify with a key written into trust.json")
	if err := os.Remove(tf); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, run("registry", "log", "--verify"), "registry_corrupt", "registry log --verify with trust.json gone")
}

// TestGovWalkDiffStale: changeset diff shows the plan against what is
// current. A governance change-set is diffed from the trust state's
// revision (it said "revision 0 → N" for every one), and a proposal made
// stale by another approval says so (its approval is refused
// changeset_stale) instead of a plan an approval would never apply.
func TestGovWalkDiffStale(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, "keys")
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	must := func(args ...string) result { t.Helper(); return mustRun(t, run, args...) }
	for _, n := range []string{"a", "b", "c"} {
		must("key", "generate", "--out", filepath.Join(keys, n))
	}
	must("key", "trust", filepath.Join(keys, "a.pub"))
	b := csOf(t, must("key", "trust", filepath.Join(keys, "b.pub"), "--json"))
	c := csOf(t, must("key", "trust", filepath.Join(keys, "c.pub"), "--json"))
	plan := func(id string) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal([]byte(must("changeset", "diff", id, "--json").stdout), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := plan(b); v["fromRevision"] != float64(0) || v["toRevision"] != float64(1) || v["stale"] != false {
		t.Fatalf("diff of a fresh trust change: %v", v)
	}
	must("changeset", "approve", b, "--key", filepath.Join(keys, "a.key"))
	if v := plan(c); v["fromRevision"] != float64(1) || v["toRevision"] != float64(1) || v["stale"] != true {
		t.Fatalf("diff of a trust change made stale: %v", v)
	}
	if r := must("changeset", "diff", c); !strings.Contains(r.stdout, "STALE") || !strings.Contains(r.stdout, "changeset_stale") {
		t.Errorf("diff of a stale change-set does not say so: %s", r.stdout)
	}
	wantRefusal(t, run("changeset", "approve", c, "--key", filepath.Join(keys, "a.key")), "changeset_stale", "approve the stale change-set")
	// Proposed again, it is current.
	c2 := csOf(t, must("key", "trust", filepath.Join(keys, "c.pub"), "--json"))
	if v := plan(c2); v["fromRevision"] != float64(1) || v["toRevision"] != float64(2) || v["stale"] != false {
		t.Fatalf("diff of the change proposed again: %v", v)
	}
}

// TestGovWalkTrustMistakes: what a person mistypes in key trust and
// policy set is a usage error (exit 64) naming the mistake, not a
// refusal of a change-set nobody wrote (changeset_invalid), and giving
// the private key file for the public one is not signer_untrusted (a
// code that means a signature by an untrusted key). Nothing is proposed.
func TestGovWalkTrustMistakes(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b")
	notKey := filepath.Join(home, "notes.txt")
	os.WriteFile(notKey, []byte("hello\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "trust", filepath.Join(keys, "b.key")}, "is a private key"},
		{[]string{"key", "trust", notKey, "--name", "n"}, "is not a public key"},
		{[]string{"key", "trust", filepath.Join(keys, "b.pub"), "--role", "admin"}, "--role"},
		{[]string{"key", "trust", filepath.Join(keys, "b.pub"), "--name", "Bob Smith"}, "key name"},
		{[]string{"policy", "set", "--threshold", "0"}, "--threshold"},
		{[]string{"policy", "set", "--threshold", "101"}, "--threshold"},
	} {
		r := run(c.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want a usage error naming %q: %+v", c.args, c.want, r)
		}
	}
	r := run("changeset", "list", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"changeSets": []`) {
		t.Errorf("a mistake proposed a change-set: %+v", r)
	}
	// A proposal says how to approve it, whichever command made it.
	for _, args := range [][]string{{"key", "trust", filepath.Join(keys, "b.pub")}, {"policy", "set", "--threshold", "2"}, {"key", "untrust", "a"}} {
		r := run(args...)
		if !strings.Contains(r.stdout, "approve with: cruxprov changeset approve ") {
			t.Errorf("%v does not say how to approve: %+v", args, r)
		} else if !strings.Contains(r.stdout, " --key KEY --home "+home+"\n") {
			// Run as printed, it approved in the default store.
			t.Errorf("%v: the approve line does not name the store: %+v", args, r)
		}
		if args[1] == "trust" {
			id := strings.Fields(strings.SplitAfter(r.stdout, "approve with: cruxprov changeset approve ")[1])[0]
			if r := run("changeset", "approve", id, "--key", filepath.Join(keys, "a.key")); r.code != 0 {
				t.Fatalf("approve %s: %+v", id, r)
			}
		}
	}
}

// TestGovWalkChangesetIDTypo: a change-set id with a character that is
// not a hex digit is a typo (usage, exit 64), as one too short is; a
// prefix in capitals finds the change-set.
func TestGovWalkChangesetIDTypo(t *testing.T) {
	_, keys, run := keyedHome(t, "a", "b")
	id := csOf(t, run("key", "trust", filepath.Join(keys, "b.pub"), "--json"))
	typo := id[7:14] + "x"
	if r := run("changeset", "approve", typo, "--key", filepath.Join(keys, "a.key")); r.code != exitUsage || !strings.Contains(r.stderr, "not hex digits") {
		t.Errorf("approve %s: want a usage error: %+v", typo, r)
	}
	if r := run("changeset", "show", strings.ToUpper(id[7:19])); r.code != 0 {
		t.Errorf("show by a capital prefix: %+v", r)
	}
}

// TestGovWalkCtrlCAtPasswordPrompt: Ctrl-C at the key password prompt
// (a terminal: no CRUXPROV_KEY_PASSWORD) stops the command promptly
// (DESIGN §14), as interrupted (exit 1), signing nothing. The signal
// context took the SIGINT and the prompt read on: the command hung.
func TestGovWalkCtrlCAtPasswordPrompt(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, "keys")
	env := func(withPassword bool) []string {
		var e []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CRUXPROV_KEY_PASSWORD=") {
				e = append(e, kv)
			}
		}
		if withPassword {
			e = append(e, "CRUXPROV_KEY_PASSWORD=pw")
		}
		return e
	}
	for _, args := range [][]string{{"key", "generate", "--out", filepath.Join(keys, "a")}, {"key", "generate", "--out", filepath.Join(keys, "b")}, {"key", "trust", filepath.Join(keys, "a.pub")}} {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = env(true)
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	cmd := exec.Command(bin, "--home", home, "key", "trust", filepath.Join(keys, "b.pub"), "--json")
	cmd.Env = env(true)
	id := csOf(t, runCmd(t, cmd))
	// Ctrl-C is a SIGINT; Ctrl-D at the empty prompt is the end of input
	// (x/term's ReadPassword read on at it, and the prompt hung).
	for _, k := range []struct {
		name string
		b    byte
		code int
		says string
	}{{"Ctrl-C", 3, exitFailure, "interrupted"}, {"Ctrl-D", 4, exitUsage, "end of input at the password prompt"}} {
		for _, args := range [][]string{
			{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key")},
			{"key", "generate", "--out", filepath.Join(keys, "c")},
		} {
			t.Run(k.name+" "+args[0]+" "+args[1], func(t *testing.T) {
				ptmx, pts := ptyPair(t)
				errFile := filepath.Join(t.TempDir(), "stderr")
				ef, _ := os.Create(errFile)
				defer ef.Close()
				cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
				cmd.Env = env(false)
				cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, io.Discard, ef
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				for i := 0; ; i++ {
					if b, _ := os.ReadFile(errFile); strings.Contains(string(b), "password: ") {
						break
					}
					if i > 200 {
						cmd.Process.Kill()
						t.Fatal("no password prompt")
					}
					time.Sleep(25 * time.Millisecond)
				}
				time.Sleep(100 * time.Millisecond)
				ptmx.Write([]byte{k.b})
				select {
				case <-exited:
				case <-time.After(5 * time.Second):
					cmd.Process.Kill()
					<-exited
					t.Fatalf("%v: still waiting at the password prompt 5 s after %s", args, k.name)
				}
				b, _ := os.ReadFile(errFile)
				if code := cmd.ProcessState.ExitCode(); code != k.code || !strings.Contains(string(b), k.says) {
					t.Errorf("%v after %s: exit %d, stderr %q", args, k.name, code, b)
				}
			})
		}
	}
	cmd = exec.Command(bin, "--home", home, "changeset", "show", id, "--json")
	if r := runCmd(t, cmd); r.code != 0 || !strings.Contains(r.stdout, `"approvals": []`) {
		t.Errorf("an interrupted approval signed: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(keys, "c.key")); err == nil {
		t.Errorf("an interrupted key generate wrote a key")
	}
}

// ptyPair opens a pseudo-terminal: its controlling side and the terminal
// a command gets as its stdin (closed when t ends).
func ptyPair(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// TestPasswordTypedAtThePrompt: key generate on a terminal reads the
// password twice without echo (Enter sends a carriage return, which the
// prompt takes as the end of the line), and the key opens with it. Two
// passwords that differ are a usage error that says to type the same one
// twice (it said only "the passwords differ"), and write no key.
func TestPasswordTypedAtThePrompt(t *testing.T) {
	out, stderr, echoed, err := keyGenerateOnTerminal(t, "s3cret pw", "s3cret pw")
	if err != nil {
		t.Fatalf("key generate: %v: %s", err, stderr)
	}
	if bytes.Contains(echoed, []byte("s3cret")) {
		t.Errorf("the terminal echoed the password: %q", echoed)
	}
	b, err := os.ReadFile(out + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.LoadPrivateKey(b, []byte("s3cret pw")); err != nil {
		t.Errorf("the key does not open with the typed password: %v", err)
	}
	out, stderr, _, err = keyGenerateOnTerminal(t, "s3cret pw", "s3cret pv")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(stderr, "usage: the passwords differ: run it again and type the same password twice") {
		t.Errorf("two passwords that differ: %v: %s", err, stderr)
	}
	if m, _ := filepath.Glob(out + ".*"); len(m) != 0 {
		t.Errorf("wrote %v", m)
	}
}

// keyGenerateOnTerminal runs key generate on a pseudo-terminal without
// CRUXPROV_KEY_PASSWORD and types each of typed at its prompts: the
// key's prefix, its stderr, what the terminal echoed, and how it ended.
func keyGenerateOnTerminal(t *testing.T, typed ...string) (out, stderr string, echoed []byte, err error) {
	t.Helper()
	ptmx, pts := ptyPair(t)
	out = filepath.Join(t.TempDir(), "typed")
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRUXPROV_KEY_PASSWORD=") {
			e = append(e, kv)
		}
	}
	errFile := filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(errFile)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	read := func() string { b, _ := os.ReadFile(errFile); return string(b) }
	cmd := exec.Command(bin, "--home", t.TempDir(), "key", "generate", "--out", out)
	cmd.Env = e
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, io.Discard, ef
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	echoes := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(ptmx); echoes <- b }()
	for i, prompt := range []string{"key password: ", "again: "} {
		for j := 0; !strings.Contains(read(), prompt); j++ {
			if j > 200 {
				cmd.Process.Kill()
				t.Fatalf("no prompt %q: %q", prompt, read())
			}
			time.Sleep(25 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // the prompt turns the echo off after it prints
		ptmx.Write([]byte(typed[i] + "\r"))
	}
	err = cmd.Wait()
	pts.Close()
	select {
	case echoed = <-echoes:
	case <-time.After(5 * time.Second):
	}
	return out, read(), echoed, err
}

// TestGovWalkEmptyPassword: CRUXPROV_KEY_PASSWORD set but empty (an unset
// shell variable exported) is what the person gave wrong: usage (64), and
// no key file is written.
func TestGovWalkEmptyPassword(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(bin, "--home", home, "key", "generate", "--out", filepath.Join(home, "keys", "a"))
	cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=")
	r := runCmd(t, cmd)
	if r.code != exitUsage || !strings.Contains(r.stderr, "empty key password") {
		t.Errorf("key generate with an empty password: %+v", r)
	}
	if m, _ := filepath.Glob(filepath.Join(home, "keys", "a.*")); len(m) != 0 {
		t.Errorf("wrote %v", m)
	}
}

// TestGovWalkRegistryID: whoever can write the registry can rewrite it
// from a first entry of their own (their key the root of trust,
// threshold 1): it has another id, so every verifier starts a fresh
// floor and trusts it on first use. governance.md says a verifier that
// must not "pins the registry id it expects": verify and run take it
// (--registry-id, CRUXPROV_REGISTRY_ID) and refuse another registry.
func TestGovWalkRegistryID(t *testing.T) {
	base, w, run, must := govWalkStore(t)
	keys := filepath.Join(base, "keys")
	install := func(key string) {
		t.Helper()
		id := strings.TrimSpace(must("install", w.echo, "--platform", "host", "--python", "/usr/bin/python3.11", "--index", w.url, "--no-compile", "--quiet").stdout)
		must("changeset", "approve", id, "--key", key)
	}
	install(filepath.Join(keys, "k.key"))
	var lg struct {
		ID string `json:"registry_id"`
	}
	if err := json.Unmarshal([]byte(must("registry", "log", "--json").stdout), &lg); err != nil || !strings.HasPrefix(lg.ID, "sha256:") {
		t.Fatalf("registry id: %v %q", err, lg.ID)
	}
	must("verify", "acme-echo", "--registry-id", lg.ID)
	if r := run("verify", "acme-echo", "--registry-id", "sha256:12"); r.code != exitUsage {
		t.Errorf("a malformed --registry-id: %+v", r)
	}
	// The registry rewritten from scratch by one writer.
	reg := filepath.Join(base, "home", "registry")
	if err := os.Rename(reg, reg+".orig"); err != nil {
		t.Fatal(err)
	}
	must("interface", "register", "acme.echo", "--schema", filepath.Join(w.schemas, "acme.echo.json"))
	must("interface", "register", "acme.diagnostics", "--schema", filepath.Join(w.schemas, "acme.diagnostics.json"))
	must("key", "generate", "--out", filepath.Join(keys, "mallory"))
	must("key", "trust", filepath.Join(keys, "mallory.pub"))
	install(filepath.Join(keys, "mallory.key"))
	must("verify", "acme-echo") // trusted on first use: what the pin prevents
	wantRefusal(t, run("verify", "acme-echo", "--registry-id", lg.ID), "registry_corrupt", "verify --registry-id of a registry rewritten from its first entry")
	cmd := exec.Command(bin, "--home", filepath.Join(base, "home"), "verify", "acme-echo", "--state-dir", filepath.Join(base, "fresh"))
	cmd.Env = append(os.Environ(), "CRUXPROV_REGISTRY_ID="+lg.ID)
	wantRefusal(t, runCmd(t, cmd), "registry_corrupt", "verify with CRUXPROV_REGISTRY_ID")
	cmd = exec.Command(bin, "--home", filepath.Join(base, "home"), "run", "acme-echo", "echo", "--input", "-", "--registry-id", lg.ID, "--secret", "acme/api-token=env:HOME")
	cmd.Stdin = strings.NewReader(`{"hello":"world"}`)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(base, "state"))
	wantRefusal(t, runCmd(t, cmd), "registry_corrupt", "run --registry-id of the rewritten registry")
}

// TestGovWalkUmask077: an operator whose umask is 077 still makes a
// registry the executors (other users) can read: 0644 files in 0755
// directories (governance.md), not a 0700 registry, pins and changesets
// and a 0600 history that every verify then refused as "no directory".
func TestGovWalkUmask077(t *testing.T) {
	parent := t.TempDir()
	os.Chmod(parent, 0o755)
	home := filepath.Join(parent, "home") // the store makes it
	keys := filepath.Join(t.TempDir(), "keys")
	for _, args := range [][]string{{"key", "generate", "--out", filepath.Join(keys, "a")}, {"key", "generate", "--out", filepath.Join(keys, "b")}, {"key", "trust", filepath.Join(keys, "a.pub")}, {"key", "trust", filepath.Join(keys, "b.pub")}, {"gc"}} { // gc makes the store's layout (gc --dry-run makes nothing)
		cmd := exec.Command("sh", append([]string{"-c", `umask 077 && exec "$@"`, "sh", bin, "--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		if r := runCmd(t, cmd); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	reg := filepath.Join(home, "registry")
	// The store an executor reads too (its envs, the lock file).
	for _, d := range []string{"", "blobs", "blobs/sha256", "envs", "tmp"} {
		if st, err := os.Stat(filepath.Join(home, d)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("store %q: %v, want 0755", d, err)
			if err == nil {
				t.Errorf("store %q: %v", d, st.Mode().Perm())
			}
		}
	}
	if st, err := os.Stat(filepath.Join(home, ".lock")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("store lock: %v, want 0644", err)
		if err == nil {
			t.Errorf("store lock: %v", st.Mode().Perm())
		}
	}
	for p, want := range map[string]os.FileMode{reg: 0o755, filepath.Join(reg, "pins"): 0o755, filepath.Join(reg, "changesets"): 0o755, filepath.Join(reg, "log.jsonl"): 0o644, filepath.Join(reg, "trust.json"): 0o644} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, want %v (%v)", p, st.Mode().Perm(), want, err)
		}
	}
	ms, _ := filepath.Glob(filepath.Join(reg, "changesets", "*.yaml"))
	for _, m := range ms {
		if st, err := os.Stat(m); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v", m, st.Mode().Perm())
		}
	}
}

// TestGovWalkApproveTwice: the same key approving a change-set twice
// (threshold 2) says that its new approval replaced its first one, and
// the change-set stays one approval short; it said "approved" as if
// another approval had counted.
func TestGovWalkApproveTwice(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, "keys")
	run := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	run("key", "generate", "--out", filepath.Join(keys, "a"))
	run("key", "generate", "--out", filepath.Join(keys, "b"))
	run("key", "trust", filepath.Join(keys, "a.pub"))
	b := csOf(t, run("key", "trust", filepath.Join(keys, "b.pub"), "--json"))
	run("changeset", "approve", b, "--key", filepath.Join(keys, "a.key"))
	p := csOf(t, run("policy", "set", "--threshold", "2", "--json"))
	run("changeset", "approve", p, "--key", filepath.Join(keys, "a.key"))
	c := csOf(t, run("policy", "set", "--threshold", "1", "--json"))
	if r := run("changeset", "approve", c, "--key", filepath.Join(keys, "a.key")); strings.Contains(r.stdout, "already") {
		t.Errorf("a first approval says replaced: %s", r.stdout)
	}
	r := run("changeset", "approve", c, "--key", filepath.Join(keys, "a.key"), "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v["replaced"] != true || v["accepted"] != false || v["approvals"] != float64(1) {
		t.Errorf("the second approval by the same key: %v %s", err, r.stdout)
	}
	if r := run("changeset", "approve", c, "--key", filepath.Join(keys, "a.key")); !strings.Contains(r.stdout, "had approved it already") {
		t.Errorf("the human line does not say so: %s", r.stdout)
	}
}

// keyedHome is a fresh home whose registry trusts the first of the keys
// it generates (password "pw") in keys as its root of trust; run runs the
// binary against that home.
// mustRun runs args through run (keyedHome's) and fails t unless the
// command exits 0.
func mustRun(t *testing.T, run func(args ...string) result, args ...string) result {
	t.Helper()
	r := run(args...)
	if r.code != 0 {
		t.Fatalf("%v: %+v", args, r)
	}
	return r
}

// proposeQuiet runs a command that proposes a change-set (key trust,
// policy set, …) through run with --quiet and returns the id it prints.
func proposeQuiet(t *testing.T, run func(args ...string) result, args ...string) string {
	t.Helper()
	r := run(append([]string{"--quiet"}, args...)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("%v: %+v", args, r)
	}
	return id
}

func keyedHome(t *testing.T, names ...string) (home, keys string, run func(args ...string) result) {
	t.Helper()
	home = t.TempDir()
	keys = filepath.Join(home, "keys")
	run = func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	for _, n := range names {
		if r := run("key", "generate", "--out", filepath.Join(keys, n)); r.code != 0 {
			t.Fatalf("key generate %s: %+v", n, r)
		}
	}
	if r := run("key", "trust", filepath.Join(keys, names[0]+".pub")); r.code != 0 {
		t.Fatalf("key trust %s: %+v", names[0], r)
	}
	return home, keys, run
}

// TestGovWalkSigningMistakes: the wrong key file for approve (the public
// half, or not a key) is a usage error as key trust's mirror mistake is,
// not a failure; --expires means nothing for a trust change (the trust
// state's replay ignores it) and is refused rather than ignored; a
// duration flag's parse error shows what it wants; a schema that is not
// JSON is the wrong file, not another schema under a registered id.
func TestGovWalkSigningMistakes(t *testing.T) {
	home, keys, run := keyedHome(t, "a", "b")
	r := run("--quiet", "key", "trust", filepath.Join(keys, "b.pub"))
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("propose b: %+v", r)
	}
	notKey := filepath.Join(home, "notes.txt")
	os.WriteFile(notKey, []byte("hello\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.pub")}, "is a public key"},
		{[]string{"changeset", "approve", id, "--key", notKey}, "is not a PEM private key"},
		{[]string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key"), "--expires", "1h"}, "a trust or policy change does not expire"},
		{[]string{"changeset", "approve", id, "--key", filepath.Join(keys, "a.key"), "--expires", "10"}, "for example 30s, 15m or 720h"},
		{[]string{"interface", "register", "x.y/v1", "--schema", notKey}, "is not a JSON document"},
	} {
		r := run(c.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want a usage error naming %q: %+v", c.args, c.want, r)
		}
	}
	if r := run("changeset", "approve", id, "--key", filepath.Join(keys, "a.key")); r.code != 0 {
		t.Fatalf("the approval itself: %+v", r)
	}
}

// TestGovWalkQuiet: with --quiet the governance commands print their
// result alone, one line a script can capture (as install prints its
// change-set id): a key's digest, a proposal's change-set id, an
// approval's state; it printed the whole story.
func TestGovWalkQuiet(t *testing.T) {
	home := t.TempDir()
	keys := filepath.Join(home, "keys")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home, "--quiet"}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		r := runCmd(t, cmd)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%v: %+v", args, r)
		}
		return r.stdout
	}
	digest := regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)
	for _, n := range []string{"a", "b"} {
		if out := run("key", "generate", "--out", filepath.Join(keys, n)); !digest.MatchString(out) {
			t.Errorf("key generate: %q", out)
		}
	}
	if out := run("key", "trust", filepath.Join(keys, "a.pub")); !digest.MatchString(out) {
		t.Errorf("key trust (the root): %q", out)
	}
	cs := run("key", "trust", filepath.Join(keys, "b.pub"))
	if !digest.MatchString(cs) {
		t.Fatalf("key trust (a proposal): %q", cs)
	}
	if out := run("changeset", "approve", strings.TrimSpace(cs), "--key", filepath.Join(keys, "a.key")); out != "approved\n" {
		t.Errorf("changeset approve: %q", out)
	}
	for _, args := range [][]string{{"policy", "set", "--threshold", "2"}, {"key", "untrust", "b"}} {
		out := run(args...)
		if !digest.MatchString(out) {
			t.Errorf("%v: %q", args, out)
		}
		if args[0] == "key" {
			if r := run("changeset", "reject", strings.TrimSpace(out), "--reason", "no"); r != "" {
				t.Errorf("changeset reject: %q", r)
			}
		}
	}
}

// TestGovWalkLogVerifyExpired: a pin whose approval expired is a state of
// the governance, not a break in it: registry log --verify lists it as
// not runnable and the audit holds (exit 0); it failed pin_expired, so a
// CI job auditing the registry went red at the first expiry.
func TestGovWalkLogVerifyExpired(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	d, err := registry.OpenDir(ctx, filepath.Join(home, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-2 * time.Hour)
	d.Now = func() time.Time { return then }
	a := registrytest.NewKey(t, "a", registry.RoleApprover)
	if _, err := d.TrustKey(ctx, a.Key, "t"); err != nil {
		t.Fatal(err)
	}
	cs, _, err := d.Propose(ctx, registrytest.Change("acme-echo", "1.0"), "t")
	if err != nil {
		t.Fatal(err)
	}
	expires := then.Add(time.Hour) // an hour ago
	if _, err := d.Approve(ctx, cs.Metadata.ID, a.Priv, &expires); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "--home", home, "registry", "log", "--verify")
	if r.code != 0 || !strings.Contains(r.stdout, "accepted pins verified") || !strings.Contains(r.stdout, "not runnable: acme-echo revision 1 (pin_expired: ") {
		t.Fatalf("registry log --verify with an expired pin: %+v", r)
	}
	r = cruxprov(t, "--home", home, "registry", "log", "--verify", "--json")
	var doc struct {
		Verified    bool `json:"verified"`
		NotRunnable []struct {
			Provider, Code string
			Revision       int64
		} `json:"not_runnable"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || !doc.Verified || len(doc.NotRunnable) != 1 || doc.NotRunnable[0].Code != "pin_expired" {
		t.Fatalf("--json: %v %+v", err, r)
	}
	// A break in the history still fails the audit.
	log := filepath.Join(home, "registry", "log.jsonl")
	b, _ := os.ReadFile(log)
	os.WriteFile(log, b[:len(b)-1], 0o644)
	if r := cruxprov(t, "--home", home, "registry", "log", "--verify"); r.code != exitRefused || !strings.Contains(r.stderr, "registry_corrupt") {
		t.Fatalf("a history without its last newline: %+v", r)
	}
}

// TestKeyUntrustNamesTheKeysOtherNames: a key trusted under two names is
// one key, and untrusting it removes it under both; key untrust says so
// (key list showed them as two keys, and nothing said the other name
// would go too).
func TestKeyUntrustNamesTheKeysOtherNames(t *testing.T) {
	_, keys, run := keyedHome(t, "a", "b")
	for _, args := range [][]string{{"key", "trust", filepath.Join(keys, "b.pub"), "--name", "b"}, {"key", "trust", filepath.Join(keys, "a.pub"), "--name", "a-again"}} {
		r := run(append(args, "--json")...)
		var doc struct {
			ChangeSet struct{ Metadata struct{ ID string } }
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.ChangeSet.Metadata.ID == "" {
			t.Fatalf("%v: %+v", args, r)
		}
		if r := run("changeset", "approve", doc.ChangeSet.Metadata.ID, "--key", filepath.Join(keys, "a.key")); r.code != 0 {
			t.Fatalf("approve %v: %+v", args, r)
		}
	}
	r := run("key", "untrust", "a-again")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: key a-again is also trusted as a (the same key): once approved, untrusting it removes it under every name") {
		t.Errorf("key untrust of a key with another name: %+v", r)
	}
	if r := run("key", "untrust", "b"); r.code != 0 || strings.Contains(r.stderr, "also trusted as") {
		t.Errorf("key untrust of a key with one name: %+v", r)
	}
}

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
	"github.com/cruxible/cruxprov/refusal"
)

// TestCopiedStoreRunsOnlyItsOwnEnvs: a store copied to another path (a
// backup restored elsewhere, a home moved to a larger disk) keeps a
// registry whose pins name the envs by their old absolute paths. verify
// and run there verified and ran the old store's env while it was still
// there (an env this store's lock does not keep from the old store's gc),
// and once it was gone advised rebuilding it in the old store. An env
// cannot move with its store (its scripts and pyvenv.cfg name the path it
// lives at), so both are refused pin_mismatch, naming the two stores and
// advising the proposal of the pin's provider in this store; followed as
// printed and approved, the copy verifies and runs its own env. The
// store reached through a symlink is the same store.
func TestCopiedStoreRunsOnlyItsOwnEnvs(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	_, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall()
	var rep struct{ Env string }
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Env == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	env := []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(base, "state")}
	in := filepath.Join(base, "in.json")
	os.WriteFile(in, []byte(`{"message":"hi"}`), 0o644)
	tok := filepath.Join(base, "token")
	os.WriteFile(tok, []byte("s3cret"), 0o600)
	runIn := func(h string, args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", h}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return runCmd(t, cmd)
	}

	// Through a symlink: the same store, its envs its own.
	link := filepath.Join(base, "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	if r := runIn(link, "verify", "acme-echo"); r.code != 0 {
		t.Fatalf("verify through a symlink to the store: %+v", r)
	}

	copied := filepath.Join(base, "copied")
	if out, err := exec.Command("cp", "-a", home, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	want := "the accepted pin names the env " + rep.Env + ", which is not in this store (" + copied + "): the registry was copied or moved from the store at " + home
	for _, args := range [][]string{
		{"verify", "acme-echo"},
		{"run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@" + tok},
	} {
		r := runIn(copied, args...)
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(refusal.PinMismatch)+": "+want) ||
			!strings.Contains(r.stderr, "; to fix: cruxprov install acme-echo==1.0.0 --sha256 ") {
			t.Errorf("%v in a copy of the store, the old store still there: %+v\nwant pin_mismatch saying %q and advising the install", args, r, want)
		}
	}

	// The old store gone: the same refusal (it said the env was gone
	// and advised rebuilding it in the old store); its advice, followed
	// as printed, proposes the provider here.
	testdir.Writable(home)
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	r := runIn(copied, "verify", "acme-echo")
	if r.code != exitRefused || !strings.Contains(r.stderr, want) {
		t.Fatalf("verify in the copy, the old store gone: %+v", r)
	}
	r.stderr = strings.ReplaceAll(r.stderr, "--index URL", "--index "+w.url)
	f := runFix(t, r, base, env...)
	if f.code != 0 {
		t.Fatalf("the advice as printed: %+v", f)
	}
	id := ""
	for _, l := range strings.Split(f.stdout, "\n") {
		if _, rest, ok := strings.Cut(l, "proposed change-set "); ok {
			id, _, _ = strings.Cut(rest, " ")
		}
	}
	if id == "" {
		t.Fatalf("the install proposed no change-set: %+v", f)
	}
	if r := runIn(copied, "changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key")); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	// The pin's own env (--no-compile, as it was made), built in the copy.
	if r := runIn(copied, "verify", "acme-echo", "--deep"); r.code != 0 || !strings.Contains(r.stdout, "env "+filepath.Join(copied, "envs", filepath.Base(rep.Env))+"\n") {
		t.Fatalf("verify of the copy's own env: %+v", r)
	}
	if r := runIn(copied, "run", "acme-echo", "echo", "--input", in, "--secret", "acme/api-token=@"+tok); r.code != 0 {
		t.Fatalf("run in the copy: %+v", r)
	}
}

// TestCopiedStoreInstallBuildsItsEnvAgain: in a copy of a store, the
// install that proposes the pin's provider again (its inputs, the env's
// --no-compile among them) meets the env copied along at its digest's
// path, sealed at the old store's. It refused env_drift advising env
// create --replace, after which the install was run again: one command
// more than needed. The install now builds that env again for its new
// path (saying so), proposes it, and approved, the copy verifies it.
func TestCopiedStoreInstallBuildsItsEnvAgain(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	base := testdir.New(t)
	w := newGovernedWorld(t, base, fx)
	home := filepath.Join(base, "home")
	_, must, approveInstall := approvingStore(t, w, base, debian)
	approveInstall() // --no-compile
	var rep struct{ Env string }
	if err := json.Unmarshal([]byte(must("verify", "acme-echo", "--json").stdout), &rep); err != nil || rep.Env == "" {
		t.Fatalf("verify --json: %v %+v", err, rep)
	}
	copied := filepath.Join(base, "copied")
	if out, err := exec.Command("cp", "-a", home, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	run := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{"--home", copied}, args...)...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME="+filepath.Join(base, "state"))
		return runCmd(t, cmd)
	}
	env := filepath.Join(copied, "envs", filepath.Base(rep.Env))
	r := run("install", w.echo, "--platform", "host", "--python", debian, "--index", w.url, "--no-compile")
	if r.code != 0 || !strings.Contains(r.stderr, env+" was sealed at "+rep.Env) || !strings.Contains(r.stdout, "env "+env) {
		t.Fatalf("install in the copy, its env copied along: %+v\nwant %s built again and proposed", r, env)
	}
	id := ""
	for _, l := range strings.Split(r.stdout, "\n") {
		if _, rest, ok := strings.Cut(l, "proposed change-set "); ok {
			id, _, _ = strings.Cut(rest, " ")
		}
	}
	if r := run("changeset", "approve", id, "--key", filepath.Join(base, "keys", "k.key")); r.code != 0 {
		t.Fatalf("approve %q: %+v", id, r)
	}
	if r := run("verify", "acme-echo", "--deep"); r.code != 0 || !strings.Contains(r.stdout, "env "+env) {
		t.Fatalf("verify of the copy's own env: %+v", r)
	}
	// env create in another copy: its --json says where the env it
	// built again had been sealed (only the warning said it).
	again := filepath.Join(base, "again")
	if out, err := exec.Command("cp", "-a", home, again).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	c := exec.Command(bin, "--home", again, "env", "create", "--wheel", w.echo, "--platform", "host", "--python", debian, "--index", w.url, "--no-compile", "--json")
	r = runCmd(t, c)
	var doc struct {
		Path     string
		Reused   bool
		SealedAt string `json:"sealed_at"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.SealedAt != rep.Env || doc.Reused || doc.Path != filepath.Join(again, "envs", filepath.Base(rep.Env)) {
		t.Errorf("env create --json in a copy: %+v (doc %+v), want sealed_at %s", r, doc, rep.Env)
	}
}

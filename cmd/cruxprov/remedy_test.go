package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/sign"
	"github.com/urfave/cli/v2"
)

// fixRE finds the command a refusal advises (the first, where it
// advises two: "; to fix: A; or: B").
var fixRE = regexp.MustCompile(`; to fix: ((?:[A-Z_]+=[^ ]* )*(?:cruxprov|chmod|cp) .*?)(?:; or: cruxprov .*)?$`)

// runFix runs the command the refusal r advises, in dir, with the built
// binary first on PATH, and returns its result.
func runFix(t *testing.T, r result, dir string, env ...string) result {
	t.Helper()
	m := fixRE.FindStringSubmatch(strings.TrimSpace(r.stderr))
	if m == nil {
		t.Fatalf("the refusal advises no command: %+v", r)
	}
	cmd := exec.Command("sh", "-c", m[1])
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH")), env...)
	return runCmd(t, cmd)
}

// TestRemediesRun: every refusal whose rendered advice names a command is
// followed by that command, run as printed, which succeeds (issue 11
// item 3). The rebuild of a drifted or deleted env (replace_env) is run
// the same way in TestOperatorAsUnprivilegedUser, TestEnvCreateVerifyList
// and TestGovernedFlow.
func TestRemediesRun(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	t.Run("embed", func(t *testing.T) {
		dir := t.TempDir()
		plain := wheeltest.Write(t, dir, "acme_echo-1.0.0-py3-none-any.whl", map[string]string{"acme_echo/__init__.py": ""})
		os.WriteFile(filepath.Join(dir, "provider.toml"), fx.Echo.Manifest, 0o644)
		os.WriteFile(filepath.Join(dir, "pylock.toml"), fx.Echo.Lock, 0o644)
		r := cruxprov(t, "inspect", plain)
		if r.code != exitRefused {
			t.Fatalf("%+v", r)
		}
		if f := runFix(t, r, dir); f.code != 0 {
			t.Fatalf("%+v", f)
		}
		if r := cruxprov(t, "inspect", filepath.Join(dir, "embedded", filepath.Base(plain))); r.code != 0 {
			t.Fatalf("the embedded wheel: %+v", r)
		}
	})
	t.Run("embed a wheel named by its path", func(t *testing.T) {
		// The advice named the wheel by its file name alone, so from the
		// directory the refused command ran in (`cruxprov inspect
		// wheels/X.whl`) it failed: no such file.
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "wheels"), 0o755)
		plain := wheeltest.Write(t, filepath.Join(dir, "wheels"), "acme_echo-1.0.0-py3-none-any.whl", map[string]string{"acme_echo/__init__.py": ""})
		os.WriteFile(filepath.Join(dir, "provider.toml"), fx.Echo.Manifest, 0o644)
		os.WriteFile(filepath.Join(dir, "pylock.toml"), fx.Echo.Lock, 0o644)
		for _, args := range [][]string{{"inspect", plain}, {"lock", "resolve", "--platform", "cp311-manylinux_2_36_x86_64", "--wheel=" + plain}} {
			r := cruxprov(t, args...)
			if r.code != exitRefused {
				t.Fatalf("%v: %+v", args, r)
			}
			// Written beside the wheel (TestEmbedAdviceWritesBesideTheWheel).
			os.RemoveAll(filepath.Join(dir, "wheels", "embedded"))
			if f := runFix(t, r, dir); f.code != 0 {
				t.Fatalf("%v: %+v", args, f)
			}
			if r := cruxprov(t, "inspect", filepath.Join(dir, "wheels", "embedded", filepath.Base(plain))); r.code != 0 {
				t.Fatalf("%v: the embedded wheel: %+v", args, r)
			}
		}
	})
	t.Run("list_envs", func(t *testing.T) {
		// A mistyped env path: neither an env nor a seal. The advice
		// lists the envs of the store it is in (whose --home the
		// refused command did not give), where the right one is.
		home, lock := envHome(t, 1, 2)
		out := createJSON(t, createArgs(home, lock, "--no-compile")...)
		typo := out.Path[:len(out.Path)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", out.Path[len(out.Path)-1])+1)%16])
		r := cruxprov(t, "env", "verify", typo)
		if r.code != exitRefused || !strings.Contains(r.stderr, "to fix: cruxprov env list --home "+home) {
			t.Fatalf("%+v", r)
		}
		if f := runFix(t, r, t.TempDir()); f.code != 0 || !strings.Contains(f.stdout, out.Digest.Hex()) {
			t.Fatalf("%+v", f)
		}
		// No store there: no env to list, and no advice to.
		gone := filepath.Join(t.TempDir(), "h", "envs", out.Digest.Hex())
		if r := cruxprov(t, "env", "verify", gone); r.code != exitRefused || strings.Contains(r.stderr, "to fix:") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("name_python", func(t *testing.T) {
		// An interpreter that is not there, or does not run, or is not
		// the platform's: the library said "name a working CPython
		// interpreter" (it said --python before issue 12 item 5) and
		// advised nothing. The advice is the command again with
		// --python, which the operator names.
		home, lock := envHome(t, 1, 2)
		dir := t.TempDir()
		notPython := filepath.Join(dir, "python3")
		os.WriteFile(notPython, []byte("#!/bin/sh\nexit 3\n"), 0o755)
		for _, python := range []string{filepath.Join(dir, "nonexistent"), "--python=" + notPython} {
			args := []string{"--home", home, "env", "create", "--lock", lock, "--platform", "host", "--offline", "--no-compile", "--json"}
			if strings.HasPrefix(python, "--python=") {
				args = append(args, python)
			} else {
				args = append(args, "--python", python)
			}
			r := cruxprov(t, args...)
			want := "; to fix: cruxprov --home " + home + " env create --lock " + lock + " --platform host --offline --no-compile --python PYTHON"
			if r.code != exitRefused || !strings.HasSuffix(strings.TrimSpace(r.stderr), want) {
				t.Fatalf("%s: %+v\nwant it to end %q", python, r, want)
			}
			r.stderr = strings.Replace(r.stderr, "PYTHON", envPython, 1)
			if f := runFix(t, r, dir); f.code != 0 {
				t.Fatalf("%s: the advice as printed: %+v", python, f)
			}
		}
	})
	t.Run("platform_list", func(t *testing.T) {
		r := cruxprov(t, "lock", "resolve", "--wheel", fx.Echo.Path, "--platform", "cp311-bogus")
		if f := runFix(t, r, t.TempDir()); f.code != 0 || !strings.Contains(f.stdout, "cp311-manylinux") {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("fetch_offline", func(t *testing.T) {
		dir := t.TempDir()
		home := filepath.Join(dir, "home")
		idx := fixtureindex.ServeSet(t, fx, t.TempDir())
		r := cruxprov(t, "--home", home, "fetch", "--wheel", fx.Echo.Path, "--platform", "cp311-manylinux_2_36_x86_64", "--offline")
		if r.code != exitRefused {
			t.Fatalf("%+v", r)
		}
		if !strings.Contains(r.stderr, "--index URL") {
			t.Fatalf("the advice does not ask for the index: %s", r.stderr)
		}
		// The advice names the index to give; give it.
		r.stderr = strings.Replace(r.stderr, "--index URL", "--index "+idx, 1)
		if f := runFix(t, r, dir); f.code != 0 {
			t.Fatalf("%+v", f)
		}
		if r := cruxprov(t, "--home", home, "fetch", "--wheel", fx.Echo.Path, "--platform", "cp311-manylinux_2_36_x86_64", "--offline"); r.code != 0 {
			t.Fatalf("offline after the advised fetch: %+v", r)
		}
	})
	t.Run("fetch_offline NAME==VERSION", func(t *testing.T) {
		// The root wheel named NAME==VERSION comes from the index only:
		// offline, the refusal said to give its file, and advised no
		// command. The advice is the install online, which proposes it.
		dir := testdir.New(t) // the env built is read-only
		home := filepath.Join(dir, "home")
		idx := fixtureindex.ServeSet(t, fx, t.TempDir())
		for _, i := range []string{"acme.echo", "acme.diagnostics"} {
			if r := cruxprov(t, "--home", home, "interface", "register", i, "--schema", fx.Interfaces[i].Path, "--quiet"); r.code != 0 {
				t.Fatalf("interface register %s: %+v", i, r)
			}
		}
		r := cruxprov(t, "--home", home, "install", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(), "--platform", "host", "--python", envPython, "--no-compile", "--offline")
		// (and, after it, the file instead: TestOfflineRootWordsForTheCommand)
		want := "; to fix: cruxprov --home " + home + " install " + fx.Echo.Name + "==" + fx.Echo.Version + " --sha256 " + fx.Echo.SHA256.Hex() + " --platform host --python " + envPython + " --no-compile --index URL; or: "
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: offline_miss: ") || !strings.Contains(r.stderr, want) {
			t.Fatalf("%+v\nwant it to end %q", r, want)
		}
		r.stderr = strings.Replace(r.stderr, "--index URL", "--index "+idx, 1)
		if f := runFix(t, r, dir); f.code != 0 || !strings.Contains(f.stdout, "proposed change-set") {
			t.Fatalf("the advice as printed: %+v", f)
		}
	})
	t.Run("governance", func(t *testing.T) {
		// The registry's refusals say what to do in words and carry a
		// remedy (issue 12 item 5): each rendered command, its
		// placeholders (PUB, KEY, FILE, ID) filled in, runs as printed.
		dir := t.TempDir()
		home := filepath.Join(dir, "home")
		env := []string{"CRUXPROV_KEY_PASSWORD=pw", "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
		run, ok := homeRunner(t, home, env)
		changeSet := func(what string, args ...string) string {
			t.Helper()
			var doc struct {
				ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
			}
			if err := json.Unmarshal([]byte(ok(what, append(args, "--json")...)), &doc); err != nil || doc.ChangeSet.Metadata.ID == "" {
				t.Fatalf("%s: no change-set proposed (%v)", what, err)
			}
			return doc.ChangeSet.Metadata.ID
		}
		follow := adviceFollower(t, dir, env)
		key := func(name string) string { return filepath.Join(dir, name) }
		for _, k := range []string{"alice", "bob", "carol", "ci"} {
			ok("key generate "+k, "key", "generate", "--out", key(k), "--quiet")
		}

		// trust_key: a trust change where no key is trusted yet, in a
		// store (an empty directory) with no registry yet: at a --home
		// that names nothing, policy set says there is no store there
		// (TestChangeAtNoStoreMakesNone).
		if err := os.Mkdir(home, 0o755); err != nil {
			t.Fatal(err)
		}
		follow("policy set in an empty registry", run("policy", "set", "--threshold", "1"), refusal.SignerUntrusted,
			"cruxprov key trust PUB --role approver --home "+home, "PUB", key("alice.pub"))
		if out := ok("key list", "key", "list"); !strings.Contains(out, "alice") {
			t.Fatalf("the advised key trust did not trust alice: %s", out)
		}

		// trust_key (builder) and approve: a container install where no
		// builder key is trusted, then where one is proposed only.
		zeros := strings.Repeat("0", 64)
		install := []string{"install", "acme-echo==1.0", "--sha256", zeros, "--backend", "container", "--image", "oci:" + filepath.Join(dir, "oci") + "@sha256:" + zeros, "--platform", "host"}
		follow("container install, no builder key", run(install...), refusal.ImageSignatureInvalid,
			"cruxprov key trust PUB --role builder --home "+home, "PUB", key("ci.pub"))
		r := run(install...)
		id := regexp.MustCompile(`the change-set (sha256:[0-9a-f]{64}) that trusts ci is proposed`).FindStringSubmatch(r.stderr)
		if id == nil {
			t.Fatalf("container install, the builder key proposed: %+v", r)
		}
		follow("container install, the builder key proposed", r, refusal.ImageSignatureInvalid,
			"cruxprov changeset approve "+id[1]+" --key KEY --home "+home, " --key KEY", " --key "+key("alice.key"))
		if r := run(install...); strings.Contains(r.stderr, "builder key") {
			t.Fatalf("container install after the advised approval: %+v", r)
		}

		// trust_key with the name: a trust change-set gone stale (another
		// approved on its base) is proposed again under its name.
		a := changeSet("key trust carol", "key", "trust", key("carol.pub"), "--role", "builder")
		b := changeSet("key trust ci2", "key", "trust", key("ci.pub"), "--name", "ci2", "--role", "builder")
		ok("approve carol", "changeset", "approve", a, "--key", key("alice.key"), "--quiet")
		follow("approve of a stale trust change-set", run("changeset", "approve", b, "--key", key("alice.key")), refusal.ChangesetStale,
			"cruxprov key trust PUB --name ci2 --role builder --home "+home, "PUB", key("ci.pub"))

		// list_keys: untrusting a name no key has.
		if f := follow("key untrust of no key", run("key", "untrust", "nobody"), refusal.ChangesetInvalid, "cruxprov key list --home "+home); !strings.Contains(f.stdout, "alice") {
			t.Fatalf("the advised key list: %+v", f)
		}

		// untrust_key: trusting another key under a name taken (bob,
		// trusted beside alice, at threshold 1).
		ok("approve bob", "changeset", "approve", changeSet("key trust bob", "key", "trust", key("bob.pub")), "--key", key("alice.key"), "--quiet")
		follow("key trust under a name taken", run("key", "trust", key("carol.pub"), "--name", "bob"), refusal.ChangesetInvalid,
			"cruxprov key untrust bob --home "+home)

		// retire: rejecting a provider's change-set once approved.
		echo := proposeEcho(t, home)
		ok("approve acme-echo", "changeset", "approve", echo, "--key", key("alice.key"), "--quiet")
		follow("reject of an approved change-set", run("changeset", "reject", echo, "--reason", "too late"), refusal.ChangesetInvalid,
			"cruxprov provider retire acme-echo --home "+home)

		// set_threshold: untrusting an approver the threshold needs.
		ok("approve threshold 2", "changeset", "approve", changeSet("policy set 2", "policy", "set", "--threshold", "2"), "--key", key("alice.key"), "--quiet")
		follow("key untrust below the threshold", run("key", "untrust", "bob"), refusal.ChangesetInvalid,
			"cruxprov policy set --threshold 1 --home "+home)

		// register_interface: an install of a provider whose interfaces
		// the registry does not know (two: the operator names each; then
		// one: the advice names it).
		wheel := []string{"install", fx.Echo.Path, "--platform", "host", "--python", envPython, "--offline", "--no-compile"}
		schema := func(id string) string { return fx.Interfaces[id].Path }
		follow("install, two interfaces unknown", run(wheel...), refusal.InterfaceUnregistered,
			"cruxprov interface register ID --schema FILE --home "+home, "register ID --schema FILE", "register acme.echo --schema "+schema("acme.echo"))
		follow("install, one interface unknown", run(wheel...), refusal.InterfaceUnregistered,
			"cruxprov interface register acme.diagnostics --schema FILE --home "+home, "--schema FILE", "--schema "+schema("acme.diagnostics"))
		if r := run(wheel...); strings.Contains(r.stderr, string(refusal.InterfaceUnregistered)) {
			t.Fatalf("install after the advised registrations: %+v", r)
		}
	})
	t.Run("gc", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to mount a tmpfs")
		}
		// A store on a 2 MiB file system: the wheel fits, its env does not.
		home := t.TempDir()
		if err := syscall.Mount("tmpfs", home, "tmpfs", 0, "size=2m"); err != nil {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		defer syscall.Unmount(home, syscall.MNT_DETACH)
		_, lock := envHomeAt(t, home, 1, 1600)
		r := cruxprov(t, createArgs(home, lock, "--no-compile", "--no-cache")...)
		// The store holds no sealed env: the advice is another store
		// (other_home; gc's advice, which names the refused command's
		// store, is run in TestSpaceAdviceFreesSpace), which gets past
		// the check once DIR is named on a file system with room.
		if r.code != exitRefused || !strings.Contains(r.stderr, " --no-cache --home DIR\n") {
			t.Fatalf("%+v", r)
		}
		other := filepath.Join(t.TempDir(), "home")
		r.stderr = strings.ReplaceAll(r.stderr, "--home DIR", "--home "+other)
		if f := runFix(t, r, t.TempDir()); f.code == exitUsage || strings.Contains(f.stderr, "free but the env needs about") {
			t.Fatalf("%+v", f)
		}
	})
}

// TestInterpreterUpdatedInPlace: an interpreter replaced in place (same
// path and version, other bytes, as a distro security update does) gives
// interpreter_drift whose advice rebuilds the env on it, under the same
// digest, with a new seal content digest (issue 11 item 3).
func TestInterpreterUpdatedInPlace(t *testing.T) {
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	dir := t.TempDir()
	python := filepath.Join(dir, "python3.11")
	b, _ := os.ReadFile(debian)
	if err := os.WriteFile(python, b, 0o755); err != nil {
		t.Fatal(err)
	}
	home, lock := envHome(t, 1, 3)
	args := []string{"--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", python, "--offline", "--no-compile", "--json"}
	before := createJSON(t, args...)
	// The update: other bytes at the same path (trailing bytes an ELF
	// loader ignores), the same version.
	f, _ := os.OpenFile(python, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("security update\n"))
	f.Close()
	r := cruxprov(t, "--home", home, "env", "verify", before.Path)
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: interpreter_drift") {
		t.Fatalf("%+v", r)
	}
	if f := runFix(t, r, dir, "CRUXPROV_HOME="+home); f.code != 0 {
		t.Fatalf("%+v", f)
	}
	after := createJSON(t, args...)
	if after.Path != before.Path || after.Digest != before.Digest || after.ContentDigest == before.ContentDigest || !after.Reused {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
}

// TestEnvVerifyFollowsALink: env verify on a symlink to an env verifies
// the env it points at (issue 11 item 9).
func TestEnvVerifyFollowsALink(t *testing.T) {
	home, lock := envHome(t, 1, 3)
	out := createJSON(t, createArgs(home, lock, "--no-compile")...)
	link := filepath.Join(t.TempDir(), "current")
	os.Symlink(out.Path, link)
	r := cruxprov(t, "--home", home, "env", "verify", link, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, out.Path) {
		t.Fatalf("%+v", r)
	}
	// A lock without the runtime: the env builds, with a warning that no
	// provider can run in it.
	r = cruxprov(t, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", envPython, "--offline", "--no-compile")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: the lock has no cruxible-provider-runtime") {
		t.Fatalf("no runtime warning: %+v", r)
	}
	// With --json, where a pipeline reads it: in the document (it was
	// dropped, stderr being quiet under --json).
	r = cruxprov(t, "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", envPython, "--offline", "--no-compile", "--json")
	var doc struct{ Warnings []string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Warnings) != 1 || !strings.HasPrefix(doc.Warnings[0], "the lock has no cruxible-provider-runtime") {
		t.Fatalf("env create --json: the runtime warning is not in the document: %+v", r)
	}
}

// TestRemediesRunAgain: the no_cache and no_bytecode remedies render the
// refused command again with --no-cache or --no-compile. Neither refusal
// can be made to happen for real here (a real CPython's compiler does not
// fail on wheels it installed; the cache fails only when a temp file in
// the store's own staging cannot be made, where the create fails first),
// so each rendering is run from the command line of a create, as the
// store's owner (uid 65534), and must succeed.
func TestRemediesRunAgain(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-remedy-", "/usr/bin/python3.11")
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o755)
	home, lock := envHomeAt(t, home, 1, 3)
	lb, _ := os.ReadFile(lock)
	lock = filepath.Join(base, "pylock.toml")
	os.WriteFile(lock, lb, 0o644)
	chownTree(t, home)
	args := []string{"cruxprov", "--home", home, "env", "create", "--lock", lock, "--platform", "host", "--python", "/usr/bin/python3.11", "--offline", "--json"}
	for _, rem := range []*refusal.Remedy{{Action: refusal.ActionNoBytecode}, {Action: refusal.ActionNoCache}} {
		t.Run(string(rem.Action), func(t *testing.T) {
			line := renderRemedy(rem, args)
			if strings.Contains(line, "--json") || !strings.HasPrefix(line, "cruxprov ") {
				t.Fatalf("%s renders %q", rem.Action, line)
			}
			cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", exe+strings.TrimPrefix(line, "cruxprov"))
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
			if f := runCmd(t, cmd); f.code != 0 {
				t.Fatalf("%s: %s: %+v", rem.Action, line, f)
			}
		})
	}
}

// TestRebuildWithConfigAndBrokenSeal: the two rebuilds an operator is
// told to run after drift work as printed on a store with the config.yaml
// of docs/operator.md (whose python and platforms must not turn
// `env create --replace ENV` into a usage error), and a seal that cannot
// be trusted or is gone advises a rebuild from the inputs the operator
// names, which works, instead of a --replace that reads that seal again.
func TestRebuildWithConfigAndBrokenSeal(t *testing.T) {
	home, lock := envHomeAt(t, t.TempDir(), 1, 3)
	env := createJSON(t, createArgs(home, lock)...).Path
	cfg := "format: cruxprov.config/v1\nplatforms: [host]\npython: " + envPython + "\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cruxprov(t, "--home", home, "env", "create", "--replace", env, "--offline"); r.code != 0 {
		t.Fatalf("--replace ENV with config.yaml's python and platforms: %+v", r)
	}
	if r := cruxprov(t, "--home", home, "env", "create", "--replace", env, "--offline", "--python", envPython); r.code != exitUsage {
		t.Fatalf("--replace ENV --python: %+v", r)
	}
	seal := strings.TrimSuffix(env, "/") + ".seal.json"
	for _, c := range []struct {
		name   string
		code   string
		damage func() error
	}{
		{"tampered", "seal_invalid", func() error {
			b, err := os.ReadFile(seal)
			if err != nil {
				return err
			}
			os.Chmod(seal, 0o644)
			return os.WriteFile(seal, b[:len(b)/2], 0o644)
		}},
		{"missing", "seal_missing", func() error { return os.Remove(seal) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.damage(); err != nil {
				t.Fatal(err)
			}
			r := cruxprov(t, "--home", home, "env", "verify", env)
			if r.code != exitRefused || !strings.Contains(r.stderr, c.code) {
				t.Fatalf("%+v", r)
			}
			if r := cruxprov(t, "--home", home, "env", "create", "--replace", env, "--offline"); r.code == 0 {
				t.Fatalf("--replace from a %s seal succeeded: %+v", c.name, r)
			}
			// The advice names the inputs to give; give them (this env
			// was made from a bare lock).
			r.stderr = strings.NewReplacer("--wheel WHEEL", "--lock "+lock, "PLATFORM", "host", "PYTHON", envPython, "--index URL", "--offline").Replace(r.stderr)
			if f := runFix(t, r, t.TempDir(), "CRUXPROV_HOME="+home); f.code != 0 {
				t.Fatalf("%+v", f)
			}
			if r := cruxprov(t, "--home", home, "env", "verify", env, "--deep"); r.code != 0 {
				t.Fatalf("after the advised rebuild: %+v", r)
			}
		})
	}
}

// TestCorruptLedgerAdviceRuns: a corrupt ledger's refusal advises the
// tolerant scan of that ledger (not of the default one), which runs as
// printed and lists the bad line; receipts list's, the list again with
// --tolerate-corrupt (TestReceiptsListShowTolerateCorrupt).
func TestCorruptLedgerAdviceRuns(t *testing.T) {
	dir := t.TempDir()
	led := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(led, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cruxprov(t, "receipts", "scan", "--ledger", led)
	if r.code != exitRefused || !strings.Contains(r.stderr, "ledger_corrupt") {
		t.Fatalf("%+v", r)
	}
	f := runFix(t, r, dir, "XDG_STATE_HOME="+dir)
	if f.code != 0 || !strings.Contains(f.stdout, "1 corrupt line,") {
		t.Fatalf("%+v", f)
	}
	r = cruxprov(t, "receipts", "list", "--ledger", led)
	if r.code != exitRefused || !strings.Contains(r.stderr, "ledger_corrupt") {
		t.Fatalf("%+v", r)
	}
	f = runFix(t, r, dir, "XDG_STATE_HOME="+dir)
	if f.code != 0 || !strings.Contains(f.stdout, "corrupt line: "+led+": line 1 ") {
		t.Fatalf("%+v", f)
	}
}

// TestRemedyKeepsHome: advice that acts on a store names the refused
// command's --home (it named none, so followed as printed it acted on
// the default store: gc collected another store's garbage, env create
// --replace rebuilt an env into the default store and said "replaced").
func TestRemedyKeepsHome(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--home DIR", []string{"cruxprov", "--home", "/s t", "env", "verify", "E"}, " --home '/s t'"},
		{"--home=DIR", []string{"cruxprov", "env", "verify", "E", "--home=/s"}, " --home /s"},
		{"-home DIR", []string{"cruxprov", "-home", "/s", "env", "verify", "E"}, " --home /s"},
		{"none", []string{"cruxprov", "env", "verify", "E"}, ""},
	} {
		// env verify PATH names no store, or another one: the env's own,
		// where its parent is an envs/ directory, is the one --replace
		// needs (with --home /s it named /s, where the env is not).
		for rem, want := range map[refusal.Action]string{
			refusal.ActionReplaceEnv: "cruxprov env create --replace /t/envs/abc --home /t",
			refusal.ActionRebuildEnv: "cruxprov env create --replace --wheel WHEEL --platform PLATFORM --python PYTHON --index URL --home /t",
		} {
			if got := renderRemedy(&refusal.Remedy{Action: rem, Target: "/t/envs/abc"}, tc.args); got != want {
				t.Errorf("%s: %s of an env in the store /t: %q, want %q", tc.name, rem, got, want)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			for rem, want := range map[refusal.Action]string{
				refusal.ActionReplaceEnv:       "cruxprov env create --replace /e" + tc.want,
				refusal.ActionGC:               "cruxprov gc --envs --dry-run" + tc.want,
				refusal.ActionReviewChangesets: "cruxprov changeset list" + tc.want,
			} {
				if got := renderRemedy(&refusal.Remedy{Action: rem, Target: "/e"}, tc.args); got != want {
					t.Errorf("%s: %q, want %q", rem, got, want)
				}
			}
		})
	}
}

// TestRemediesRenderRerun: the refusals that lost their flag when the
// libraries stopped naming the CLI (a verify or run of a pin with
// several materializations for the backend; a container run allowing a
// variable podman reads itself; a container verify or run of a pin with
// no container materialization) carry a remedy, rendered as a command:
// the refused one again with --platform (a --platform given replaced,
// before any "--"), the refused one again without that --allow-env (each
// form it was given in), the install that proposes the pin again with
// its images and the one to add, and the refused command again with
// --python (an interpreter that does not run, or not the platform's) or
// another entrypoint.
func TestRemediesRenderRerun(t *testing.T) {
	platforms := &refusal.Remedy{Action: refusal.ActionNamePlatform, Platforms: []string{"a", "b"}}
	// A container run from a layout with no temporary directory podman
	// can name: the same run under another TMPDIR.
	if got, want := renderRemedy(&refusal.Remedy{Action: refusal.ActionSetTempDir}, []string{"cruxprov", "run", "acme.echo", "echo", "--json"}),
		"TMPDIR=DIR cruxprov run acme.echo echo"; got != want {
		t.Errorf("set_tmpdir: %q, want %q", got, want)
	}
	home := &refusal.Remedy{Action: refusal.ActionDisallowEnv, Target: "HOME"}
	run := []string{"cruxprov", "--home", "/h", "run", "acme-echo", "echo", "--input", "in put.json", "--backend", "container"}
	img := "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32)
	target := "acme-echo==1.0.0@sha256:" + strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name string
		rem  *refusal.Remedy
		args []string
		want string
	}{
		{"verify", platforms, []string{"cruxprov", "verify", "acme-echo", "--backend", "container", "--json"},
			"cruxprov verify acme-echo --backend container --platform PLATFORM"},
		{"run", platforms, run,
			"cruxprov --home /h run acme-echo echo --input 'in put.json' --backend container --platform PLATFORM"},
		{"--platform P", platforms, []string{"cruxprov", "verify", "--platform", "a", "acme-echo", "--backend", "container"},
			"cruxprov verify acme-echo --backend container --platform PLATFORM"},
		{"--platform=P", platforms, []string{"cruxprov", "verify", "acme-echo", "-platform=a", "--json=true"},
			"cruxprov verify acme-echo --platform PLATFORM"},
		{"before --", platforms, []string{"cruxprov", "verify", "--backend", "container", "--", "acme-echo"},
			"cruxprov verify --backend container --platform PLATFORM -- acme-echo"},
		{"no --platform", platforms, []string{"cruxprov", "env", "verify", "/h/envs/abc"}, ""},
		{"--allow-env NAME", home, append(slices.Clone(run), "--allow-env", "LANG", "--allow-env", "HOME", "--json"),
			"cruxprov --home /h run acme-echo echo --input 'in put.json' --backend container --allow-env LANG"},
		{"--allow-env=NAME", home, append(slices.Clone(run), "--allow-env=HOME", "--allow-env=LANG"),
			"cruxprov --home /h run acme-echo echo --input 'in put.json' --backend container --allow-env LANG"},
		{"--allow-env A,NAME", home, append(slices.Clone(run), "--allow-env", "LANG,HOME,TZ"),
			"cruxprov --home /h run acme-echo echo --input 'in put.json' --backend container --allow-env LANG,TZ"},
		{"--allow-env HOME_DIR", home, append(slices.Clone(run), "--allow-env", "HOME_DIR"), ""},
		// An interpreter named again: where the command names one, and
		// not for env create --replace (the seal's; --python is a usage
		// error there) or a command that names none.
		{"--python P", &refusal.Remedy{Action: refusal.ActionNamePython}, []string{"cruxprov", "install", "w.whl", "--python", "/x", "--platform", "host"},
			"cruxprov install w.whl --platform host --python PYTHON"},
		{"image build", &refusal.Remedy{Action: refusal.ActionNamePython}, []string{"cruxprov", "image", "build", "w.whl", "--base", "b@sha256:" + strings.Repeat("0", 64)},
			"cruxprov image build w.whl --base b@sha256:" + strings.Repeat("0", 64) + " --python PYTHON"},
		{"--replace", &refusal.Remedy{Action: refusal.ActionNamePython}, []string{"cruxprov", "env", "create", "--replace", "/h/envs/abc"}, ""},
		{"no --python", &refusal.Remedy{Action: refusal.ActionNamePython}, []string{"cruxprov", "env", "verify", "/h/envs/abc"}, ""},
		// An entrypoint named again: verify's --entrypoint, run's
		// argument (where one argument alone named it).
		{"verify --entrypoint", &refusal.Remedy{Action: refusal.ActionNameEntrypoint, Target: "ehco"}, []string{"cruxprov", "verify", "acme-echo", "--entrypoint=ehco", "--json"},
			"cruxprov verify acme-echo --entrypoint ENTRYPOINT"},
		{"run NAME E", &refusal.Remedy{Action: refusal.ActionNameEntrypoint, Target: "ehco"}, []string{"cruxprov", "run", "acme-echo", "ehco", "--input", "-", "--json"},
			"cruxprov run acme-echo ENTRYPOINT --input -"},
		{"run NAME E, E twice", &refusal.Remedy{Action: refusal.ActionNameEntrypoint, Target: "ehco"}, []string{"cruxprov", "run", "acme-echo", "ehco", "--idempotency-key", "ehco"}, ""},
		{"propose a container materialization", &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Backend: "container"}, run,
			"cruxprov install acme-echo==1.0.0 --sha256 " + strings.Repeat("cd", 32) + " --platform PLATFORM --python PYTHON --backend container --image REF@sha256:DIGEST --index URL --home /h"},
		{"propose one more", &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Images: []string{img}, Backend: "container"}, run,
			"cruxprov install acme-echo==1.0.0 --sha256 " + strings.Repeat("cd", 32) + " --platform PLATFORM --python PYTHON --backend container --image " + img + " --image REF@sha256:DIGEST --index URL --home /h"},
		// A pinned layout gone: a copy of it put back (LAYOUT: where
		// it was built), its directory made where missing.
		{"restore_layout", &refusal.Remedy{Action: refusal.ActionRestoreLayout, Target: "/srv/my oci"}, run, "cp -R LAYOUT/. '/srv/my oci'"},
		{"restore_layout, no target", &refusal.Remedy{Action: refusal.ActionRestoreLayout}, run, ""},
		// A pin with images names its platforms (and its envs'
		// interpreter, none for a pin of images alone): the install
		// named placeholders for them.
		{"propose a pin of images", &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Images: []string{img}, Platforms: []string{"a", "b"}}, run,
			"cruxprov install acme-echo==1.0.0 --sha256 " + strings.Repeat("cd", 32) + " --platform a,b --backend container --image " + img + " --index URL --home /h"},
		{"propose a pin of an env and an image", &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Images: []string{img}, Platforms: []string{"a", "b"}, Python: "/usr/bin/python3.11"}, run,
			"cruxprov install acme-echo==1.0.0 --sha256 " + strings.Repeat("cd", 32) + " --platform a,b --python /usr/bin/python3.11 --backend container --image " + img + " --index URL --home /h"},
		{"propose one more for a platform asked", &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Images: []string{img}, Backend: "container", Platforms: []string{"a", "b"}}, run,
			"cruxprov install acme-echo==1.0.0 --sha256 " + strings.Repeat("cd", 32) + " --platform a,b --backend container --image " + img + " --image REF@sha256:DIGEST --index URL --home /h"},
	} {
		if got := renderRemedy(tc.rem, tc.args); got != tc.want {
			t.Errorf("%s: %s renders %q, want %q", tc.name, tc.rem.Action, got, tc.want)
		}
	}
}

// TestContainerRemediesRun: the container refusals that lost their flag
// (issue 12 item 5) advise a command again, and each runs as printed, its
// placeholders filled in. A provider pinned as a local env, verified
// --backend container, advises the install that proposes a container
// materialization, naming the image to add; a pin with images for two
// platforms, verified without one, advises the verify again with
// --platform, once for each, whose --json remedy names the two; a verify or run of an
// entrypoint the pin has not advises it again with one. A container run
// that allows HOME advises the run again without that --allow-env: it
// is refused before podman is asked, and its advice, run with no podman
// on PATH (it would start a container), passes that check and is
// refused for podman missing.
func TestContainerRemediesRun(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("needs %s", envPython)
	}
	dir := t.TempDir()
	t.Cleanup(func() { testdir.Writable(dir) })
	fx, idx := fixtureindex.Serve(t, dir)
	baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(dir, "base"))
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "builder.key"), priv, 0o600)
	os.WriteFile(filepath.Join(dir, "builder.pub"), pub, 0o644)
	home, state, out := filepath.Join(dir, "home"), filepath.Join(dir, "state"), filepath.Join(dir, "oci")
	env := []string{"CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000", "XDG_STATE_HOME=" + state}
	run, ok := homeRunner(t, home, env)
	follow := adviceFollower(t, dir, env)
	remedy := func(what string, r result) map[string]any {
		t.Helper()
		var doc struct {
			Refused struct{ Remedy map[string]any }
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Refused.Remedy == nil {
			t.Fatalf("%s --json: no remedy (%v): %+v", what, err, r)
		}
		return doc.Refused.Remedy
	}
	approve := func(what, stdout string) {
		t.Helper()
		id := regexp.MustCompile(`(?:proposed change-set|change-set) (sha256:[0-9a-f]{64})`).FindStringSubmatch(stdout)
		if id == nil {
			t.Fatalf("%s: no change-set proposed: %s", what, stdout)
		}
		ok("approve "+what, "changeset", "approve", id[1], "--key", filepath.Join(dir, "alice.key"), "--quiet")
	}

	var built struct{ Digest string }
	r := run("image", "build", fx.Echo.Name+"=="+fx.Echo.Version, "--sha256", fx.Echo.SHA256.Hex(), "--index", idx,
		"--platform", imagetest.Platform+","+imagetest.PlatformARM, "--base", baseRef,
		"--shim", imagetest.Platform+"="+imagetest.Shim(t), "--shim", imagetest.PlatformARM+"="+imagetest.ShimFor(t, "arm64"),
		"--output", "oci:"+out, "--sign-key", filepath.Join(dir, "builder.key"), "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &built) != nil || built.Digest == "" {
		t.Fatalf("image build: %+v", r)
	}
	ok("key generate", "key", "generate", "--out", filepath.Join(dir, "alice"), "--quiet")
	ok("key trust alice", "key", "trust", filepath.Join(dir, "alice.pub"), "--name", "alice")
	approve("the builder key", ok("key trust ci", "key", "trust", filepath.Join(dir, "builder.pub"), "--name", "ci", "--role", "builder"))
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		ok("interface register "+i, "interface", "register", i, "--schema", fx.Interfaces[i].Path, "--quiet")
	}
	approve("the local install", ok("install", "install", fx.Echo.Path, "--index", idx, "--platform", "host", "--python", envPython, "--no-compile"))

	// propose, for a container materialization: the install names the
	// image to add (it advised nothing).
	verifyContainer := []string{"verify", "acme-echo", "--backend", "container", "--state-dir", state}
	if rem := remedy("verify --backend container", run(append(verifyContainer, "--json")...)); rem["action"] != string(refusal.ActionPropose) || rem["backend"] != "container" {
		t.Fatalf("verify --backend container --json: remedy %v", rem)
	}
	install := "cruxprov install " + fx.Echo.Name + "==" + fx.Echo.Version + " --sha256 " + fx.Echo.SHA256.Hex() +
		" --platform PLATFORM --python PYTHON --no-compile --backend container --image REF@sha256:DIGEST --index URL --home " + home
	f := follow("verify --backend container of a local pin", run(verifyContainer...), refusal.PinUnapproved, install,
		"PLATFORM", imagetest.Platform+","+imagetest.PlatformARM, "PYTHON", envPython, "REF@sha256:DIGEST", "oci:"+out+"@"+built.Digest, "--index URL", "--index "+idx)
	approve("the advised install", f.stdout)

	// name_platform: two container platforms pinned, none named.
	r = run(append(verifyContainer, "--json")...)
	if rem := remedy("verify of two platforms", r); rem["action"] != string(refusal.ActionNamePlatform) ||
		fmt.Sprint(rem["platforms"]) != fmt.Sprint([]string{imagetest.Platform, imagetest.PlatformARM}) {
		t.Fatalf("verify of two platforms --json: remedy %v", rem)
	}
	// The verify again for each platform (it advised --platform
	// PLATFORM, the pin's platforms in the detail alone).
	again := "cruxprov --home " + home + " verify acme-echo --backend container --state-dir " + state + " --platform "
	f = follow("verify of two platforms", run(verifyContainer...), refusal.PlatformUnsupported,
		again+imagetest.Platform+"; or: "+again+imagetest.PlatformARM)
	if !strings.Contains(f.stdout, "platform "+imagetest.Platform) {
		t.Fatalf("the advised verify: %+v", f)
	}

	// name_entrypoint: verify --entrypoint, and run's argument, of one
	// the pin has not; each advice, the entrypoint filled in, runs (the
	// pin's local env).
	f = follow("verify --entrypoint ehco", run("verify", "acme-echo", "--entrypoint", "ehco", "--state-dir", state), refusal.EntrypointUnknown,
		"cruxprov --home "+home+" verify acme-echo --state-dir "+state+" --entrypoint ENTRYPOINT", "ENTRYPOINT", "echo")
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("tok"), 0o600)
	in := filepath.Join(dir, "hello.json")
	os.WriteFile(in, []byte(`{"hello": "world"}`), 0o644)
	f = follow("run acme-echo ehco", run("run", "acme-echo", "ehco", "--input", in, "--secret", "acme/api-token=@"+token, "--state-dir", state), refusal.EntrypointUnknown,
		"cruxprov --home "+home+" run acme-echo ENTRYPOINT --input "+in+" --secret acme/api-token=@"+token+" --state-dir "+state, "ENTRYPOINT", "echo")
	if !strings.Contains(f.stdout, `"hello":"world"`) {
		t.Fatalf("the advised run: %+v", f)
	}

	// restore_layout: the pinned layout moved away (a cleanup of the
	// directory the operator installed it from, say). The refusal
	// advised to check the path; it advises to copy the layout back,
	// or to propose another image (the pin's platforms and interpreter
	// filled in), and the copy, LAYOUT filled in, makes it verify.
	aside := filepath.Join(dir, "ci-artifact")
	if err := os.Rename(out, aside); err != nil {
		t.Fatal(err)
	}
	verifyOne := append(slices.Clone(verifyContainer), "--platform", imagetest.Platform)
	f = follow("verify of a layout gone", run(verifyOne...), refusal.FetchFailed,
		"cp -R LAYOUT/. "+out+"; or: "+strings.NewReplacer("PLATFORM", imagetest.Platform+","+imagetest.PlatformARM, "PYTHON", envPython).Replace(install), "LAYOUT", aside)
	ok("verify the layout put back", verifyOne...)

	// disallow_env: refused before podman is asked (PATH has none).
	input := filepath.Join(dir, "in.json")
	os.WriteFile(input, []byte(`{}`), 0o644)
	call := []string{"run", "acme-echo", "echo", "--input", input, "--backend", "container", "--platform", imagetest.Platform, "--state-dir", state}
	cmd := exec.Command(bin, append(append([]string{"--home", home}, call...), "--allow-env", "LANG,HOME")...)
	cmd.Env = append(os.Environ(), append(env, "PATH=/nonexistent")...)
	r = runCmd(t, cmd)
	// Refused after its intent: the line names its receipt after the advice.
	want := "; to fix: cruxprov --home " + home + " " + strings.Join(call, " ") + " --allow-env LANG; its receipt: "
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: container_unavailable: a container run cannot pass HOME") || !strings.Contains(r.stderr, want) {
		t.Fatalf("run --allow-env LANG,HOME: %+v\nwant it to say %q", r, want)
	}
	// The advice as printed passes that check: with no podman on PATH,
	// podman missing is what refuses it then (or, rootless on cgroups
	// v1, the limits podman could not apply, found before it is run).
	fix := strings.TrimPrefix(want, "; to fix: cruxprov")
	fix = strings.TrimSuffix(fix, "; its receipt: ")
	cmd = exec.Command("sh", "-c", bin+fix)
	cmd.Env = append(os.Environ(), append(env, "PATH=/nonexistent")...)
	if f := runCmd(t, cmd); f.code != exitRefused || !strings.Contains(f.stderr, "refused: container_unavailable: ") || strings.Contains(f.stderr, "cannot pass") {
		t.Fatalf("the advised run, no podman on PATH: %+v", f)
	}
}

// homeRunner runs cruxprov --home home with env added to the test's
// environment: run returns the result, ok fails the test (naming what)
// unless the command exits 0, and returns its stdout.
func homeRunner(t *testing.T, home string, env []string) (run func(args ...string) result, ok func(what string, args ...string) string) {
	run = func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return runCmd(t, cmd)
	}
	ok = func(what string, args ...string) string {
		t.Helper()
		r := run(args...)
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r.stdout
	}
	return run, ok
}

// adviceFollower returns follow: it checks that r is refused with code,
// advising want, and runs the advice (in dir, with env added) with fill's
// placeholders replaced, failing the test unless it exits 0.
func adviceFollower(t *testing.T, dir string, env []string) func(what string, r result, code refusal.Code, want string, fill ...string) result {
	return func(what string, r result, code refusal.Code, want string, fill ...string) result {
		t.Helper()
		if r.code != exitRefused || !strings.Contains(r.stderr, "refused: "+string(code)+":") || !strings.HasSuffix(strings.TrimSpace(r.stderr), "; to fix: "+want) {
			t.Fatalf("%s: %+v\nwant %s advising %q", what, r, code, want)
		}
		r.stderr = strings.NewReplacer(fill...).Replace(r.stderr)
		f := runFix(t, r, dir, env...)
		if f.code != 0 {
			t.Fatalf("%s: the advice as printed: %+v", what, f)
		}
		return f
	}
}

// TestHomeGivenIsTheParsers: the --home a remedy carries is the one the
// command ran on, the last given, as the flag parser takes it (homeArg
// took the first, configNamesIndex the last).
func TestHomeGivenIsTheParsers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		home string
		ok   bool
	}{
		{[]string{"cruxprov", "verify", "x"}, "", false},
		{[]string{"cruxprov", "--home", "A", "verify", "x"}, "A", true},
		{[]string{"cruxprov", "--home=A", "verify", "x", "-home", "B"}, "B", true},
		{[]string{"cruxprov", "--home", "A", "verify", "x", "--home=B"}, "B", true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if home, ok := homeGiven(tc.args); home != tc.home || ok != tc.ok {
				t.Errorf("homeGiven = %q, %v; want %q, %v", home, ok, tc.home, tc.ok)
			}
		})
	}
	// The parser's own answer, for the last case.
	app := newApp(io.Discard, io.Discard)
	var got string
	app.Commands = append(app.Commands, &cli.Command{Name: "probe-home", Action: func(c *cli.Context) error { got = c.String("home"); return nil }})
	if err := app.Run([]string{"cruxprov", "--home", "A", "--home=B", "probe-home"}); err != nil || got != "B" {
		t.Fatalf("the flag parser took %q (%v), not the last --home", got, err)
	}
}

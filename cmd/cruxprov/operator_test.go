package main

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/refusal"
)

// asUser runs the binary exe as uid/gid 65534 (nobody) with a clean
// environment whose HOME is home.
func asUser(t *testing.T, exe, home string, args ...string) result {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	return runCmd(t, cmd)
}

// TestOperatorAsUnprivilegedUser runs the operator's whole local flow as
// an ordinary user (uid 65534) that owns its own store (DESIGN §14,
// issue 11 items 1–4): package embed, index build, env create online
// (with and without bytecode, with and without the caches), verify fast
// and deep, tampering refused and the advised command run, a deleted env
// rebuilt from its seal, env remove, gc. Root would hide every mode bug.
func TestOperatorAsUnprivilegedUser(t *testing.T) {
	const python = "/usr/bin/python3.11"
	base, exe := nobodyBase(t, "cruxprov-operator-", python)
	fx := fixtures.ForTest(t, fixtures.Options{})
	wheels := filepath.Join(base, "wheels")
	os.MkdirAll(wheels, 0o755)
	ents, _ := os.ReadDir(filepath.Dir(fx.Runtime.Path))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(fx.Runtime.Path), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(wheels, e.Name()), b, 0o644)
	}
	plain := wheeltest.Write(t, base, "Acme_Plain-2.0.0-py3-none-any.whl", map[string]string{
		"acme_plain/__init__.py": "def run(ctx):\n    return None\n",
	})
	mf, lf := embedInputs(t, base, "acme-plain", fx)
	user := filepath.Join(base, "user") // the operator's $HOME
	os.MkdirAll(user, 0o755)
	chownTree(t, base)
	home := filepath.Join(user, ".local/share/cruxprov")

	step := func(name string, want int, args ...string) result {
		t.Helper()
		r := asUser(t, exe, user, args...)
		if r.code != want {
			t.Fatalf("%s: want exit %d: %+v", name, want, r)
		}
		return r
	}

	step("package embed", 0, "package", "embed", plain, "--manifest", mf, "--lock", lf, "-o", filepath.Join(base, "release")+"/")
	if _, err := os.Stat(filepath.Join(base, "release", filepath.Base(plain))); err != nil {
		t.Fatalf("embed output: %v", err)
	}
	step("index build", 0, "index", "build", filepath.Join(base, "index"), "--from", wheels, "--quiet")
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(base, "index"))))
	defer srv.Close()
	idx := srv.URL + "/simple/"
	echo := filepath.Join(wheels, filepath.Base(fx.Echo.Path))

	// With bytecode (the default), then without: two envs.
	compiled := createdOf(t, step("env create", 0, "env", "create", "--wheel", echo, "--platform", "host", "--python", python, "--index", idx, "--json"))
	if compiled.Reused || !compiled.Compiled {
		t.Fatalf("first create: %+v", compiled)
	}
	again := createdOf(t, step("env create again", 0, "env", "create", "--wheel", echo, "--platform", "host", "--python", python, "--index", idx, "--json"))
	if !again.Reused || again.Digest != compiled.Digest {
		t.Fatalf("second create: %+v", again)
	}
	plainEnv := createdOf(t, step("env create --no-compile", 0, "env", "create", "--wheel", echo, "--platform", "host", "--python", python, "--index", idx, "--no-compile", "--json"))
	if plainEnv.Reused || plainEnv.Compiled || plainEnv.Digest == compiled.Digest || plainEnv.Files >= compiled.Files {
		t.Fatalf("--no-compile reused or shares the digest of the compiled env: %+v vs %+v", plainEnv, compiled)
	}
	// Without the caches, in a second store: the same digests.
	home2 := filepath.Join(user, "store2")
	for _, nc := range []bool{false, true} {
		args := []string{"--home", home2, "env", "create", "--wheel", echo, "--platform", "host", "--python", python, "--index", idx, "--no-cache", "--json"}
		if nc {
			args = append(args, "--no-compile")
		}
		out := createdOf(t, step("env create --no-cache", 0, args...))
		if want := map[bool]string{false: compiled.Digest.String(), true: plainEnv.Digest.String()}[nc]; out.Digest.String() != want || out.ContentDigest.IsZero() {
			t.Errorf("--no-cache (no-compile %v): %+v", nc, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home2, "cache", "unpacked-v1")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(home2, "cache", "unpacked-v1")); len(ents) > 0 {
			t.Errorf("--no-cache wrote the unpacked cache: %v", ents)
		}
	}

	// Modes: the env and its files are read-only, the seal too.
	env := compiled.Path
	for p, want := range map[string]fs.FileMode{env: 0o555, env + ".seal.json": 0o444, filepath.Join(env, "pyvenv.cfg"): 0o444} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode().Perm(), want, err)
		}
	}
	for _, deep := range []string{"--no-progress", "--deep"} {
		step("env verify "+deep, 0, "env", "verify", env, deep)
	}

	// Tampering is refused, and the advised command repairs it.
	target := filepath.Join(env, "pyvenv.cfg")
	os.Chmod(target, 0o644)
	os.WriteFile(target, []byte("home = /tmp\n"), 0o644)
	r := step("verify tampered", exitRefused, "env", "verify", env)
	fix := "to fix: cruxprov env create --replace " + env
	if !strings.Contains(r.stderr, "refused: "+string(refusal.EnvDrift)) || !strings.Contains(r.stderr, fix) {
		t.Fatalf("tampered: %+v", r)
	}
	step("the advised --replace", 0, "env", "create", "--replace", env, "--offline")
	step("verify after --replace", 0, "env", "verify", env, "--deep")

	// A deleted env: the advice is the same command, and it works.
	os.Chmod(env, 0o755)
	if err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", "chmod -R u+w '"+env+"' && rm -rf '"+env+"'").Run(); err != nil {
		t.Fatal(err)
	}
	r = step("verify deleted", exitRefused, "env", "verify", env)
	if !strings.Contains(r.stderr, fix) {
		t.Fatalf("deleted: %+v", r)
	}
	step("rebuild the deleted env", 0, "env", "create", "--replace", env, "--offline")
	step("verify rebuilt", 0, "env", "verify", env)

	// Copied into another home (cp -a ENV ENV.seal.json ENV.index DEST/):
	// intact byte for byte, but its scripts name env, so it does not work
	// there. Verify refuses it, naming where it was sealed; rebuilt where
	// it is (--replace, which builds it for that path), it verifies.
	home3 := filepath.Join(user, "store3")
	dest := filepath.Join(home3, "envs")
	cp := filepath.Join(dest, filepath.Base(env))
	if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c",
		"mkdir -p '"+dest+"' && cp -a '"+env+"' '"+env+".seal.json' '"+env+".index' '"+dest+"/'").CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	for _, mode := range []string{"--no-progress", "--deep"} {
		r := step("verify a copy "+mode, exitRefused, "--home", home3, "env", "verify", cp, mode)
		if !strings.Contains(r.stderr, "refused: "+string(refusal.EnvDrift)) || !strings.Contains(r.stderr, "sealed at "+env+", not here") || !strings.Contains(r.stderr, "env create") {
			t.Fatalf("a copy in another home (%s): %+v", mode, r)
		}
	}
	step("rebuild the copy where it is", 0, "--home", home3, "env", "create", "--replace", "--wheel", echo, "--platform", "host", "--python", python, "--index", idx)
	step("verify the rebuilt copy", 0, "--home", home3, "env", "verify", cp, "--deep")

	// env remove, then gc.
	// By a digest prefix, as change-set ids (a short one is a usage error).
	step("env remove by a short prefix", exitUsage, "env", "remove", plainEnv.Digest.String()[:12])
	// While another process holds the store (an install between its env
	// and its proposal), env remove waits for it, and says so.
	lock, err := os.Open(filepath.Join(home, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	rm := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "env", "remove", plainEnv.Digest.String()[:19])
	rm.Env, rm.Stderr = []string{"PATH=/usr/bin:/bin", "HOME=" + user}, &stderr
	if err := rm.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Lstat(plainEnv.Path); err != nil {
		t.Errorf("env remove went on while the store was held: %v", err)
	}
	lock.Close()
	if err := rm.Wait(); err != nil || !strings.Contains(stderr.String(), "waiting for the store "+home+": the processes using it (pid ") {
		t.Fatalf("env remove once the store was released: %v, stderr %q", err, stderr.String())
	}
	step("env remove by a prefix now unknown", exitUsage, "env", "remove", plainEnv.Digest.String()[:19])
	if _, err := os.Lstat(plainEnv.Path); err == nil {
		t.Errorf("env remove left %s", plainEnv.Path)
	}
	if r := step("env remove again", 0, "env", "remove", plainEnv.Digest.String()); !strings.Contains(r.stdout, "nothing removed") {
		t.Errorf("a second env remove: %+v", r)
	}
	r = step("verify removed", exitRefused, "env", "verify", plainEnv.Path)
	if !strings.Contains(r.stderr, "refused: "+string(refusal.SealMissing)) {
		t.Errorf("removed: %+v", r)
	}
	step("gc", 0, "gc")
	step("verify after gc", 0, "env", "verify", env)
	if _, err := os.Stat(home); err != nil {
		t.Fatalf("the default home was not used: %v", err)
	}
}

// TestReadOnlyStoreSaysNotWritable: an executor with read access only
// (DESIGN §14) that runs fetch or gc against the operator's store is told
// the store is not writable by it and what to do; fetch said only "store:
// open .../.tmp-…: permission denied", gc "gc: remove …: permission
// denied".
func TestReadOnlyStoreSaysNotWritable(t *testing.T) {
	base, exe := nobodyBase(t, "cruxprov-ro-store-", "")
	idx, tlock, _ := fetchFixture(t)
	lock := filepath.Join(base, "pylock.toml")
	lb, _ := os.ReadFile(tlock)
	os.WriteFile(lock, lb, 0o644)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)                                    // gc makes no store where there is none
	if r := cruxprov(t, "--home", home, "gc"); r.code != 0 { // creates the layout, as root
		t.Fatalf("%+v", r)
	}
	os.WriteFile(filepath.Join(home, "blobs", "sha256", "junk"), nil, 0o644)
	nobody := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		return runCmd(t, cmd)
	}
	r := nobody("fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx)
	if r.code == 0 || !strings.Contains(r.stderr, "writable") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("fetch: %+v", r)
	}
	r = nobody("gc")
	if r.code != exitFailure || !strings.Contains(r.stderr, "writable") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("gc: %+v", r)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "tmp")); len(ents) != 0 {
		t.Errorf("staging debris: %v", ents)
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/sign"
)

// TestInputFileDeniedSaysWhatToDo: a file named on the command line that
// this user may not read (a CI job's signing key mounted for another
// user, 0600) is a usage error naming the path that denied it (the file,
// or the first directory on the way this user may not enter), its owner,
// and what to do: it said only "usage: --sign-key KEY: permission denied"
// (found walking ci.md as cruxprov-rootless). As root, the command runs
// as uid 65534 on root's key; as another user, on its own key of mode
// 0000, which it is told to chmod.
func TestInputFileDeniedSaysWhatToDo(t *testing.T) {
	priv, _, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir, exe, key string) result {
		t.Helper()
		shim := filepath.Join(dir, "cruxshim")
		os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755)
		whl := filepath.Join(dir, "acme_echo-1.0.0-py3-none-any.whl")
		os.WriteFile(whl, []byte("not read before the key"), 0o644)
		w := filepath.Join(dir, "w") // the user's own, to write in
		os.Mkdir(w, 0o755)
		os.Chown(w, 65534, 65534)
		args := []string{"--home", filepath.Join(w, "home"), "image", "build", "--wheel", whl,
			"--index", "http://127.0.0.1:1/simple/", "--platform", imagetest.Platform,
			"--base", "oci:" + dir + "@sha256:" + strings.Repeat("0", 64), "--shim", shim, "--output", "oci:" + filepath.Join(w, "out"),
			"--sign-key", key}
		if os.Geteuid() == 0 {
			return asNobody(t, exe, []string{"HOME=/nonexistent", "CRUXPROV_KEY_PASSWORD=pw"}, args...)
		}
		cmd := exec.Command(exe, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
		return runCmd(t, cmd)
	}
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		key := filepath.Join(dir, "builder.key")
		os.WriteFile(key, priv, 0o600)
		os.Chmod(key, 0)
		r := run(dir, bin, key)
		want := "usage: --sign-key " + key + ": permission denied on " + key + ", which is this user's own: give it read access (chmod u+rX " + key + ")"
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("own key of mode 0000: %+v\nwant %s", r, want)
		}
		return
	}
	base, exe := nobodyBase(t, "cruxprov-inputdenied-", "")
	key := filepath.Join(base, "builder.key")
	os.WriteFile(key, priv, 0o600) // root's
	shut := filepath.Join(base, "secrets")
	os.Mkdir(shut, 0o700)
	inShut := filepath.Join(shut, "builder.key")
	os.WriteFile(inShut, priv, 0o644)
	for _, c := range []struct{ key, at string }{{key, key}, {inShut, shut}} {
		r := run(base, exe, c.key)
		want := "usage: --sign-key " + c.key + ": permission denied to this user (uid 65534) on " + c.at + " (its owner: uid 0): have its owner give this user read access"
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: %+v\nwant %s", c.key, r, want)
		}
	}
}

// TestPlatformFileDeniedSaysWhatToDo: a --platform-file this user may not
// read is refused as a --lock is, naming the path that denied it and what
// to do; it said only "cannot read --platform-file: open F: permission
// denied" (found walking platforms.md as cruxprov-rootless).
func TestPlatformFileDeniedSaysWhatToDo(t *testing.T) {
	args := func(dir, plat string) []string {
		lock := filepath.Join(dir, "pylock.toml")
		os.WriteFile(lock, []byte("lock-version = \"1.0\"\ncreated-by = \"t\"\npackages = []\n"), 0o644)
		return []string{"--home", filepath.Join(dir, "home"), "lock", "resolve", "--lock", lock, "--platform-file", plat}
	}
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		plat := filepath.Join(dir, "p.json")
		os.WriteFile(plat, []byte("{}"), 0o644)
		os.Chmod(plat, 0)
		r := runCmd(t, exec.Command(bin, args(dir, plat)...))
		want := "usage: --platform-file " + plat + ": permission denied on " + plat + ", which is this user's own: give it read access (chmod u+rX " + plat + ")"
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("own platform file of mode 0000: %+v\nwant %s", r, want)
		}
		return
	}
	base, exe := nobodyBase(t, "cruxprov-platdenied-", "")
	plat := filepath.Join(base, "p.json")
	os.WriteFile(plat, []byte("{}"), 0o600) // root's
	r := asNobody(t, exe, []string{"HOME=/nonexistent"}, args(base, plat)...)
	want := "usage: --platform-file " + plat + ": permission denied to this user (uid 65534) on " + plat + " (its owner: uid 0): have its owner give this user read access"
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("root's platform file: %+v\nwant %s", r, want)
	}
}

// TestFlagFilesDeniedSayWhatToDo: interface register's --schema, package
// embed's --manifest and --lock, --ca-bundle and index build's --from
// that this user may not read are usage errors naming the path that
// denied it, its owner and what to do, as every file a flag names
// (docs/cli.md); they said only "--schema F: permission denied",
// "cannot read --manifest: open F: permission denied", "--ca-bundle:
// stat F: permission denied" and, for --from, "error: index build: open
// DIR: permission denied", exit 1 (found walking cli.md as
// cruxprov-rootless).
func TestFlagFilesDeniedSayWhatToDo(t *testing.T) {
	cases := func(dir, denied, deniedDir string) []struct {
		flag string
		args []string
	} {
		lock := filepath.Join(dir, "pylock.toml")
		os.WriteFile(lock, []byte("lock-version = \"1.0\"\ncreated-by = \"t\"\npackages = []\n"), 0o644)
		whl := filepath.Join(dir, "acme_echo-1.0.0-py3-none-any.whl")
		os.WriteFile(whl, []byte("not read before the flags' files"), 0o644)
		home := filepath.Join(dir, "home")
		return []struct {
			flag string
			args []string
		}{
			{"--schema", []string{"--home", home, "interface", "register", "acme.echo", "--schema", denied}},
			{"--manifest", []string{"--home", home, "package", "embed", whl, "--manifest", denied, "--lock", lock, "-o", filepath.Join(dir, "out") + "/"}},
			{"--lock", []string{"--home", home, "package", "embed", whl, "--manifest", lock, "--lock", denied, "-o", filepath.Join(dir, "out") + "/"}},
			{"--ca-bundle", []string{"--home", home, "fetch", "--lock", lock, "--platform", "cp311-win_amd64", "--index", "http://127.0.0.1:1/simple/", "--ca-bundle", denied}},
			{"--from", []string{"--home", home, "index", "build", filepath.Join(dir, "index"), "--from", deniedDir}},
		}
	}
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		denied, deniedDir := filepath.Join(dir, "f"), filepath.Join(dir, "wheels")
		os.WriteFile(denied, []byte("{}"), 0o644)
		os.Chmod(denied, 0)
		os.Mkdir(deniedDir, 0)
		t.Cleanup(func() { os.Chmod(deniedDir, 0o755) })
		for _, c := range cases(dir, denied, deniedDir) {
			p := denied
			if c.flag == "--from" {
				p = deniedDir
			}
			r := runCmd(t, exec.Command(bin, c.args...))
			want := "usage: " + c.flag + " " + p + ": permission denied on " + p + ", which is this user's own: give it read access (chmod u+rX " + p + ")"
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("own %s of mode 0000: %+v\nwant %s", c.flag, r, want)
			}
		}
		return
	}
	base, exe := nobodyBase(t, "cruxprov-flagdenied-", "")
	denied, deniedDir := filepath.Join(base, "f"), filepath.Join(base, "wheels")
	os.WriteFile(denied, []byte("{}"), 0o600) // root's
	os.Mkdir(deniedDir, 0o700)                // root's
	for _, c := range cases(base, denied, deniedDir) {
		p := denied
		if c.flag == "--from" {
			p = deniedDir
		}
		r := asNobody(t, exe, []string{"HOME=/nonexistent"}, c.args...)
		want := "usage: " + c.flag + " " + p + ": permission denied to this user (uid 65534) on " + p + " (its owner: uid 0): have its owner give this user read access"
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("root's %s: %+v\nwant %s", c.flag, r, want)
		}
	}
}

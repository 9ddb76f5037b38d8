package main

// Adversarial tests of the command line as scripts and CI drive it: every
// test here reproduced a defect before its fix.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/internal/fixtures"
)

// TestQAFlagWithoutValueAtEnd: a flag that takes a value, given last, must
// be a usage error; it used to swallow the reordered "--" or the command
// name ("version --home" printed the top-level help and exited 0, "index
// build X --from" read a directory named "--").
func TestQAFlagWithoutValueAtEnd(t *testing.T) {
	for _, args := range [][]string{
		{"version", "--home"},
		{"index", "build", "out", "--from"},
		{"inspect", "x.whl", "--home"},
		{"env", "verify", "x", "--jobs"},
		{"platform", "show", "host", "--python"},
	} {
		r := cruxprov(t, args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestQAHelpBeforePositional: "inspect --help W" shows inspect's help; it
// used to exit 1 with "No help topic for 'W'".
func TestQAHelpBeforePositional(t *testing.T) {
	for _, args := range [][]string{{"inspect", "--help", "x.whl"}, {"env", "verify", "-h", "x"}, {"inspect", "x.whl", "--help"}} {
		r := cruxprov(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Example") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// jsonDoc decodes stdout as exactly one JSON object.
func jsonDoc(t *testing.T, r result) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v: %+v", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document: %+v", r)
	}
	return v
}

// TestQAJSONSpellings: --json=1 (and =t, =TRUE) turns JSON output on in
// the command, so failures must be JSON too; stdout used to be empty for
// a refusal or a usage error.
func TestQAJSONSpellings(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "nope-1.0-py3-none-any.whl")
	os.WriteFile(junk, []byte("not a zip"), 0o644)
	for _, j := range []string{"--json=1", "--json=t", "--json=TRUE", "-json"} {
		r := cruxprov(t, j, "inspect", junk)
		v := jsonDoc(t, r)
		ref, _ := v["refused"].(map[string]any)
		if r.code != exitRefused || v["schema"] != "cruxprov.inspect/v1" || ref["code"] != "wheel_invalid" {
			t.Errorf("%s: %+v", j, r)
		}
		r = cruxprov(t, "inspect", j)
		if v := jsonDoc(t, r); r.code != exitUsage || v["schema"] != "cruxprov.inspect/v1" {
			t.Errorf("%s usage: %+v", j, r)
		}
	}
}

// TestQARefusedLineWithJSON: a refusal prints its one stderr line with
// --json too (as usage errors, failures and lock resolve's refusals do);
// it used to print nothing on stderr.
func TestQARefusedLineWithJSON(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "nope-1.0-py3-none-any.whl")
	os.WriteFile(junk, []byte("not a zip"), 0o644)
	r := cruxprov(t, "inspect", junk, "--json")
	jsonDoc(t, r)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: wheel_invalid: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("%+v", r)
	}
}

// TestQAMissingCommand: no command, or a command group without its
// subcommand, is a usage error (exit 64, and with --json one JSON
// document); it used to print the help on stdout and exit 0, so
// "cruxprov env --json" gave a script text instead of JSON.
func TestQAMissingCommand(t *testing.T) {
	for _, args := range [][]string{{}, {"--json"}, {"env"}, {"env", "--json"}, {"lock", "--quiet"}, {"platform", "--json"}} {
		r := cruxprov(t, args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: %+v", args, r)
			continue
		}
		if hasFlag(append([]string{"cruxprov"}, args...), "json") {
			jsonDoc(t, r)
		} else if r.stdout != "" {
			t.Errorf("%v: stdout %q", args, r.stdout)
		}
	}
	for _, args := range [][]string{{"--help"}, {"env", "--help"}, {"-h"}} {
		if r := cruxprov(t, args...); r.code != 0 || !strings.Contains(r.stdout, "USAGE") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestQAInterruptMessage: SIGINT in the middle of a fetch says it was
// interrupted and what to do (exit 1, one line, one JSON document with
// --json); it used to print "error: context canceled" (and an interrupted
// interpreter probe blamed --python).
func TestQAInterruptMessage(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		qaInterrupt(t, asJSON)
	}
}

func qaInterrupt(t *testing.T, asJSON bool) {
	started := make(chan struct{}, 8)
	stop := make(chan struct{})
	defer close(stop)
	idx, lock, _ := fetchFixtureWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, ".whl") {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body[:2])
			w.(http.Flusher).Flush()
			started <- struct{}{}
			select { // the rest never comes
			case <-r.Context().Done():
			case <-stop:
			}
		})
	})
	home := t.TempDir()
	args := []string{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--index", idx, "--home", home}
	if asJSON {
		args = append(args, "--json")
	}
	cmd := exec.Command(bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFailure {
		t.Fatalf("exit after SIGINT: %v (%s)", err, se.String())
	}
	r := result{so.String(), se.String(), ee.ExitCode()}
	if !strings.HasPrefix(r.stderr, "error: interrupted") || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "context canceled") {
		t.Errorf("json=%v: %+v", asJSON, r)
	}
	if asJSON {
		v := jsonDoc(t, r)
		if e, _ := v["error"].(map[string]any); v["schema"] != "cruxprov.fetch/v1" || e["kind"] != "interrupted" {
			t.Errorf("json: %v", v)
		}
	} else if r.stdout != "" {
		t.Errorf("stdout: %q", r.stdout)
	}
	if got := fetchBlobs(t, home); len(got) != 0 {
		t.Errorf("store holds %v after SIGINT", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, "tmp")); len(ents) != 0 {
		t.Errorf("staging debris: %v", ents)
	}
}

// TestQALockNotAFile: fetch and env create refuse a --lock that is a
// directory with lock_missing, as lock resolve does; they used to exit 1
// with a bare "read D: is a directory".
func TestQALockNotAFile(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range [][]string{{"fetch"}, {"env", "create"}} {
		r := cruxprov(t, append(cmd, "--lock", dir, "--platform", fetchTestPlatform, "--offline", "--json")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "not a regular file") {
			t.Errorf("%v: %+v", cmd, r)
		}
	}
}

// TestQAIndexURLNeverPrintsSecrets: a malformed --index that carries a
// credential (no scheme separator, a fragment, no host) is a usage error
// that never prints the secret; each used to be echoed verbatim.
func TestQAIndexURLNeverPrintsSecrets(t *testing.T) {
	for _, u := range []string{
		"u:SEKRET@127.0.0.1/simple/",
		"http:u:SEKRET@127.0.0.1/simple/",
		"http://127.0.0.1:1/simple/#SEKRET",
		"http://127.0.0.1:1/simple/?#SEKRET",
		"http:///u:SEKRET@127.0.0.1/simple/",
		"http://u:SEKRET@/simple/",
		"ftp://u:SEKRET@127.0.0.1:1/simple/",
	} {
		for _, j := range []string{"--quiet", "--json"} {
			r := cruxprov(t, "fetch", "--lock", "pylock.toml", "--platform", fetchTestPlatform, "--index", u, j)
			if r.code != exitUsage || strings.Contains(r.stdout+r.stderr, "SEKRET") {
				t.Errorf("%s %s: %+v", u, j, r)
			}
		}
	}
}

// TestQALockResolveRedactsURLs: a lock whose wheel URLs carry a
// credential (a private index's user:token@) is resolved without printing
// it; lock resolve --json used to print every url verbatim.
func TestQALockResolveRedactsURLs(t *testing.T) {
	_, lock, _ := fetchFixture(t)
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(t.TempDir(), "pylock.toml")
	if err := os.WriteFile(cred, []byte(strings.ReplaceAll(string(b), "url = \"https://", "url = \"https://user:SEKRET@")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{"--json", "--quiet"} {
		r := cruxprov(t, "lock", "resolve", "--lock", cred, "--platform", fetchTestPlatform, j)
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, "SEKRET") || (j == "--json" && !strings.Contains(r.stdout, "user:xxxxx@")) {
			t.Errorf("%s: %+v", j, r)
		}
	}
}

// TestQAHomeNotADirectory: a --home that is a file, or under one, fails
// with one line naming --home and what to do (and one JSON document with
// --json); it used to print "store H: mkdir H: not a directory" (env list:
// "open H/envs: not a directory") with no next step.
func TestQAHomeNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "home")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, lock, _ := fetchFixture(t)
	for _, home := range []string{file, filepath.Join(file, "sub")} {
		for _, args := range [][]string{
			{"gc"},
			{"env", "list"},
			{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline"},
		} {
			r := cruxprov(t, append(args, "--home", home)...)
			if r.code != exitFailure || !strings.Contains(r.stderr, "--home") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("%s %v: %+v", home, args, r)
			}
			r = cruxprov(t, append(args, "--home", home, "--json")...)
			if v := jsonDoc(t, r); r.code != exitFailure || !strings.Contains(fmt.Sprint(v["error"]), "--home") {
				t.Errorf("%s %v --json: %+v", home, args, r)
			}
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Errorf("the file given as --home changed: %q", b)
	}
}

// TestQAEmbedOutputDirMissing: -o into a directory that does not exist is
// a usage error naming -o (nothing written); it used to exit 1 with a bare
// "stat DIR: no such file or directory".
func TestQAEmbedOutputDirMissing(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	mf, lf := embedInputs(t, t.TempDir(), "acme-echo", s)
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	r := cruxprov(t, "package", "embed", s.Echo.Path, "--manifest", mf, "--lock", lf, "-o", filepath.Join(missing, s.Echo.Filename))
	if r.code != exitUsage || !strings.Contains(r.stderr, "-o") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was created", missing)
	}
}

// TestQAEmptyArgument: an empty positional argument (an unset shell
// variable) is a usage error; `index build "" --from W` used to write an
// index into the current directory, and `env verify ""` verified it.
func TestQAEmptyArgument(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	cwd := t.TempDir()
	for _, args := range [][]string{
		{"index", "build", "", "--from", filepath.Dir(s.Echo.Path)},
		{"env", "verify", ""},
		{"inspect", ""},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
		var se bytes.Buffer
		cmd.Stderr = &se
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.HasPrefix(se.String(), "usage: ") {
			t.Errorf("%q: %v %s", args, err, se.String())
		}
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("written into the working directory: %v", ents)
	}
}

// TestQANegativeJobs: env verify --jobs -3 is a usage error as it is for
// fetch and env create; it was accepted silently.
func TestQANegativeJobs(t *testing.T) {
	r := cruxprov(t, "env", "verify", t.TempDir(), "--jobs", "-3")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--jobs") {
		t.Errorf("%+v", r)
	}
}

// TestQAEmptyFlagValue: a flag given an empty value (an unset shell
// variable) is a usage error; `--python ""` was refused as a broken
// interpreter after the store was created, and `--home ""` silently used
// the default store.
func TestQAEmptyFlagValue(t *testing.T) {
	for _, args := range [][]string{
		{"env", "create", "--lock", "pylock.toml", "--platform", "host", "--offline", "--python", ""},
		{"platform", "show", "host", "--python="},
		{"--home", "", "env", "list"},
		{"env", "list", "--home="},
	} {
		r := cruxprov(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "empty") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: %+v", args, r)
		}
	}
}

// TestQAIndexBuildFromNotADirectory: --from naming nothing, or a file, is
// a usage error naming --from; it used to exit 1 with a bare "index build:
// open F: not a directory".
func TestQAIndexBuildFromNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, from := range []string{filepath.Join(dir, "nope"), file} {
		r := cruxprov(t, "index", "build", out, "--from", from)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--from") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: %+v", from, r)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was created", out)
	}
}

// TestQAReadOnlyStore: an executor with read access only (DESIGN §14)
// that runs fetch or gc against the operator's store is told the store is
// not writable by it and what to do; fetch said only "store: open
// .../.tmp-…: permission denied", gc "gc: remove …: permission denied".
func TestQAReadOnlyStore(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv")
	}
	base, err := os.MkdirTemp("", "cruxprov-qa-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	exe := filepath.Join(base, "cruxprov")
	b, _ := os.ReadFile(bin)
	os.WriteFile(exe, b, 0o755)
	idx, tlock, _ := fetchFixture(t)
	lock := filepath.Join(base, "pylock.toml")
	lb, _ := os.ReadFile(tlock)
	os.WriteFile(lock, lb, 0o644)
	home := filepath.Join(base, "home")
	if r := cruxprov(t, "--home", home, "gc"); r.code != 0 { // creates the layout, as root
		t.Fatalf("%+v", r)
	}
	os.WriteFile(filepath.Join(home, "blobs", "sha256", "junk"), nil, 0o644)
	nobody := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe, "--home", home}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{so.String(), se.String(), code}
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

// TestQAEnvListCountsTheRoot: env list reports the same package count as
// env create for an env made from a root wheel; it left the root out ("1
// packages" for an env create called "2 packages").
func TestQAEnvListCountsTheRoot(t *testing.T) {
	if _, err := os.Stat(envPython); err != nil {
		t.Skipf("no %s", envPython)
	}
	fx := fixtures.ForTest(t, fixtures.Options{})
	idx := t.TempDir()
	if r := cruxprov(t, "index", "build", idx, "--from", filepath.Dir(fx.Echo.Path), "--quiet"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(idx)))
	defer srv.Close()
	home := t.TempDir()
	t.Cleanup(func() { chmodTree(home) })
	out := createJSON(t, "--home", home, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", srv.URL+"/simple/", "--no-compile", "--json")
	var list struct {
		Envs []envListed `json:"envs"`
	}
	r := cruxprov(t, "--home", home, "env", "list", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Envs) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	if got := list.Envs[0].Packages; got != out.Packages {
		t.Errorf("env list says %d packages, env create %d", got, out.Packages)
	}
}

// TestQAOutputWriteFailure: a result that cannot be written (stdout on a
// full disk) fails with exit 1; it exited 0, so "cruxprov ... --json >
// out.json" on a full disk looked like success with the result lost.
func TestQAOutputWriteFailure(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full")
	}
	defer full.Close()
	for _, args := range [][]string{{"version"}, {"version", "--json"}, {"platform", "list"}, {"refusals", "--json"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
		var se bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &se
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.HasPrefix(se.String(), "error: ") || strings.Count(se.String(), "\n") != 1 {
			t.Errorf("%v: %v %q", args, err, se.String())
		}
	}
}

// TestQAInputNotARegularFile: a FIFO or a device named as an input file
// fails at once with one line; a FIFO hung the command (even SIGINT did
// not stop it), /dev/zero read until the Go runtime died "out of memory"
// with a goroutine dump.
func TestQAInputNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	s := fixtures.ForTest(t, fixtures.Options{})
	mf, lf := embedInputs(t, t.TempDir(), "acme-echo", s)
	for _, bad := range []string{fifo, "/dev/zero"} {
		for _, tc := range []struct {
			code int
			args []string
		}{
			{exitUsage, []string{"lock", "resolve", "--lock", bad, "--platform", fetchTestPlatform}},
			{exitUsage, []string{"fetch", "--lock", bad, "--platform", fetchTestPlatform, "--offline"}},
			{exitUsage, []string{"env", "create", "--lock", bad, "--platform", fetchTestPlatform, "--offline"}},
			{exitUsage, []string{"env", "create", "--wheel", bad, "--platform", fetchTestPlatform, "--offline"}},
			{exitUsage, []string{"inspect", bad}},
			{exitUsage, []string{"lock", "resolve", "--lock", lf, "--platform-file", bad}},
			{exitUsage, []string{"package", "embed", s.Echo.Path, "--manifest", bad, "--lock", lf, "-o", t.TempDir()}},
			{exitUsage, []string{"package", "embed", s.Echo.Path, "--manifest", mf, "--lock", bad, "-o", t.TempDir()}},
			{exitUsage, []string{"fetch", "--lock", lf, "--platform", fetchTestPlatform, "--index", "http://127.0.0.1:1/simple/", "--ca-bundle", bad}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
			var se bytes.Buffer
			cmd.Stderr = &se
			err := cmd.Run()
			cancel()
			ee, _ := err.(*exec.ExitError)
			if ee == nil || ee.ExitCode() != tc.code || strings.Count(se.String(), "\n") != 1 {
				t.Errorf("%v: %v %.300s", tc.args, err, se.String())
			}
		}
	}
}

// TestQALockErrorsNeverPrintSecrets: a lock whose URL carries a
// credential is refused without printing it; a bad escape, an unparseable
// URL, a non-http scheme and a VCS source printed the URL verbatim.
func TestQALockErrorsNeverPrintSecrets(t *testing.T) {
	const head = "lock-version = \"1.0\"\ncreated-by = \"t\"\nrequires-python = \">=3.9\"\n\n[[packages]]\nname = \"a\"\nversion = \"1.0\"\n"
	const sha = "hashes = { sha256 = \"97a580f79f45eaea31fb43cf7dd287dc66ccf6ac6e2f9287526f67fca6d17724\" }\n"
	dir := t.TempDir()
	for i, body := range []string{
		"\n[[packages.wheels]]\nurl = \"https://user:SEKRET@h.example/files/a-1.0-py3-none-any%zz.whl\"\n" + sha,
		"\n[[packages.wheels]]\nurl = \"https://user:SEKRET@[::1/a-1.0-py3-none-any.whl\"\n" + sha,
		"\n[[packages.wheels]]\nurl = \"ftp://user:SEKRET@h.example/a-1.0-py3-none-any.whl\"\n" + sha,
		"vcs = { type = \"git\", url = \"https://user:SEKRET@github.com/x/a.git\", commit-id = \"0123456789abcdef0123456789abcdef01234567\" }\n",
	} {
		lock := filepath.Join(dir, fmt.Sprintf("l%d.toml", i))
		if err := os.WriteFile(lock, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"lock", "resolve", "--lock", lock, "--platform", fetchTestPlatform, "--json"},
			{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline"},
		} {
			r := cruxprov(t, args...)
			if r.code != exitRefused || strings.Contains(r.stdout+r.stderr, "SEKRET") {
				t.Errorf("lock %d %v: %+v", i, args[:2], r)
			}
		}
	}
}

// TestQAGroupHelpHasExample: the help of every command group shows an
// example too; "package --help" had none (TestEveryCommandHasExampleHelp
// walks only the leaves).
func TestQAGroupHelpHasExample(t *testing.T) {
	for _, c := range newApp(nil, nil).Commands {
		if len(c.Subcommands) == 0 {
			continue
		}
		if r := cruxprov(t, c.Name, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Example") {
			t.Errorf("%s --help: %+v", c.Name, r)
		}
	}
}

// TestQAEnvCreateNonUTF8Home: an env under a home whose path is not UTF-8
// is refused before anything is written: Python cannot start a venv there
// (site.py cannot decode pyvenv.cfg; python -m venv refuses too). env
// create reported such an env created and verify called it ok.
func TestQAEnvCreateNonUTF8Home(t *testing.T) {
	home := filepath.Join(t.TempDir(), "bad\xffdir")
	r := cruxprov(t, "--home", home, "env", "create", "--lock", "pylock.toml", "--platform", fetchTestPlatform, "--offline", "--json")
	v := jsonDoc(t, r)
	if ref, _ := v["refused"].(map[string]any); r.code != exitRefused || ref["code"] != "materialize_failed" || !strings.Contains(r.stderr, "UTF-8") {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(home); err == nil {
		t.Errorf("%q was created", home)
	}
}

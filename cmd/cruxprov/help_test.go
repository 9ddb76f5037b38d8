package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cruxible/cruxprov/refusal"
)

// TestHelpIsHonest: every command's --help shows an example, every example
// runs a command that exists with flags it has, and no flag line says
// "(default …)" twice (issue 11 item 9), shows a zero default or the
// placeholder "value".
func TestHelpIsHonest(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	exists := map[string]bool{"": true}
	var paths [][]string
	var walk func(prefix []string, cs []*cli.Command)
	flagsOf := map[string]map[string]bool{"": {}}
	for _, f := range app.Flags {
		for _, n := range f.Names() {
			flagsOf[""][n] = true
		}
	}
	walk = func(prefix []string, cs []*cli.Command) {
		for _, c := range cs {
			p := append(append([]string{}, prefix...), c.Name)
			exists[strings.Join(p, " ")] = true
			flagsOf[strings.Join(p, " ")] = map[string]bool{"help": true, "h": true}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					flagsOf[strings.Join(p, " ")][n] = true
				}
			}
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	delete(exists, "help")
	example := regexp.MustCompile(`(?m)^\s+cruxprov((?:\s+[a-z][a-z-]*)*)`)
	for _, p := range append(paths, nil) {
		t.Run(strings.Join(append([]string{"cruxprov"}, p...), " "), func(t *testing.T) {
			// The binary, not run() in-process: urfave/cli adds "help"
			// subcommands to the shared command tree as it runs.
			r := cruxprov(t, append(append([]string{}, p...), "--help")...)
			help := r.stdout
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if !strings.Contains(help, "Example:") {
				t.Errorf("no example:\n%s", help)
			}
			if strings.Contains(help, "help, h") {
				// A help command there was listed ("package --help"
				// did), and refused as unknown.
				t.Errorf("lists a help command, which does not exist:\n%s", help)
			}
			for _, m := range example.FindAllStringSubmatch(help[strings.Index(help, "Example:")+1:], -1) {
				words := strings.Fields(m[1])
				// The longest command path the words name must exist, and
				// stop at a positional (a word that is not a command).
				known := ""
				for i := range words {
					cand := strings.Join(words[:i+1], " ")
					if exists[cand] {
						known = cand
					}
				}
				if len(words) > 0 && known == "" {
					t.Errorf("example names no command: cruxprov%s", m[1])
				}
			}
			// Every flag an example passes is one its command (or the
			// app) has: the rest of the example's line, up to a pipe or
			// a redirection, continued lines joined.
			ex := strings.ReplaceAll(help[strings.Index(help, "Example:"):], "\\\n", " ")
			if i := strings.Index(ex, "\nOPTIONS:"); i >= 0 {
				ex = ex[:i]
			}
			if i := strings.Index(ex, "\nCOMMANDS:"); i >= 0 {
				ex = ex[:i]
			}
			for _, line := range strings.Split(ex, "\n") {
				i := strings.Index(line, "cruxprov ")
				if i < 0 {
					continue
				}
				words := strings.Fields(strings.FieldsFunc(line[i:], func(r rune) bool { return r == '|' || r == '>' || r == '#' })[0])[1:]
				var cmd []string
				for _, w := range words {
					if !exists[strings.Join(append(append([]string{}, cmd...), w), " ")] {
						break
					}
					cmd = append(cmd, w)
				}
				for _, w := range words[len(cmd):] {
					name, _, _ := strings.Cut(w, "=")
					if !strings.HasPrefix(name, "-") || name == "-" || flagsOf[strings.Join(cmd, " ")][strings.TrimLeft(name, "-")] || flagsOf[""][strings.TrimLeft(name, "-")] {
						continue
					}
					t.Errorf("example passes %s, which cruxprov %s has not: %s", name, strings.Join(cmd, " "), strings.TrimSpace(line))
				}
			}
			for _, line := range strings.Split(help, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("doubled default: %s", line)
				}
				// A zero default says nothing a person can use, and a
				// flag line showing urfave/cli's placeholder "value"
				// does not say what the value is.
				if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "--") && (f[1] == "value" || strings.Contains(line, "(default: 0)") || strings.Contains(line, "(default: 0s)")) {
					t.Errorf("flag line without a meaningful placeholder or default: %s", line)
				}
			}
		})
	}
}

// TestHelpBeforePositional: "inspect --help W" shows inspect's help; it
// used to exit 1 with "No help topic for 'W'".
func TestHelpBeforePositional(t *testing.T) {
	for _, args := range [][]string{{"inspect", "--help", "x.whl"}, {"env", "verify", "-h", "x"}, {"inspect", "x.whl", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != 0 || !strings.Contains(r.stdout, "Example") {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

// TestHelpJSON: --help with --json prints the help inside one JSON
// document (schema cruxprov.help/v1, the command path, the text) and
// exits 0, wherever the flags are; it printed the text alone, which no
// JSON reader can take. --quiet changes nothing there.
func TestHelpJSON(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		command string
	}{
		{[]string{"--help", "--json"}, ""},
		{[]string{"--json", "-h"}, ""},
		{[]string{"env", "create", "--help", "--json"}, "env create"},
		{[]string{"--json", "verify", "acme-echo", "-h"}, "verify"},
		{[]string{"changeset", "--json", "--quiet", "--help"}, "changeset"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cruxprov(t, tc.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("%+v", r)
			}
			v := jsonDoc(t, r)
			help, _ := v["help"].(string)
			if v["schema"] != "cruxprov.help/v1" || v["command"] != tc.command || !strings.Contains(help, "USAGE:") || !strings.Contains(help, "cruxprov "+tc.command) {
				t.Errorf("%v", v)
			}
		})
	}
}

// TestUsageErrorJSON: a usage error with --json (and --quiet) exits 64
// with one line on stderr and one JSON document on stdout naming the
// command's schema (cruxprov.error/v1 before a command is known).
func TestUsageErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		schema string
	}{
		{[]string{"--json"}, "cruxprov.error/v1"},
		{[]string{"no-such-command", "--json"}, "cruxprov.error/v1"},
		{[]string{"env", "--json"}, "cruxprov.env/v1"},
		{[]string{"version", "--json", "--quiet", "--no-such-flag"}, "cruxprov.version/v1"},
		{[]string{"verify", "--json", "--quiet"}, "cruxprov.verify/v1"},
		{[]string{"install", "--json", "--home"}, "cruxprov.install/v2"},
		{[]string{"version", "--json", "--", "--help"}, "cruxprov.version/v1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cruxprov(t, tc.args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%+v", r)
			}
			v := jsonDoc(t, r)
			e, _ := v["error"].(map[string]any)
			if v["schema"] != tc.schema || e["kind"] != "usage" || e["message"] == "" {
				t.Errorf("%v", v)
			}
		})
	}
}

// TestMissingRequiredFlagIsUsage: a command run without a flag it needs
// is a usage error (exit 64, one line on stderr, the JSON error document
// and nothing else on stdout), as every other usage error is.
func TestMissingRequiredFlagIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "set"},
		{"changeset", "reject", "abcdef12"},
		{"changeset", "approve", "abcdef12"},
		{"key", "generate"},
		{"interface", "register", "acme.echo"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, append(args, "--json")...)
			var doc struct {
				Error struct{ Kind, Message string }
			}
			if r.code != exitUsage || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Error.Kind != "usage" || !strings.Contains(doc.Error.Message, "is required") {
				t.Fatalf("%+v", r)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "usage: --") {
				t.Fatalf("stderr: %q", r.stderr)
			}
		})
	}
}

// TestReceiptsBeforeAnyRun: before any run has written this host's
// default ledger, receipts list and scan list nothing and succeed; a
// --ledger that is not there is still an error.
func TestReceiptsBeforeAnyRun(t *testing.T) {
	state := t.TempDir()
	for _, sub := range []string{"list", "scan"} {
		cmd := exec.Command(bin, "receipts", sub, "--json")
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		r := runCmd(t, cmd)
		var doc struct{ Attempts, Ledgers []any }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Attempts == nil || doc.Ledgers == nil || len(doc.Attempts) != 0 {
			t.Errorf("receipts %s: %+v", sub, r)
		}
	}
	if r := cruxprov(t, "receipts", "list", "--ledger", filepath.Join(state, "nope.jsonl")); r.code != exitUsage || !strings.Contains(r.stderr, "usage: no ledger at "+filepath.Join(state, "nope.jsonl")+": check the path") {
		t.Errorf("a missing --ledger: %+v", r)
	}
	// One the user cannot read: what to do, as that user (root reads all).
	led := filepath.Join(state, "other.jsonl")
	os.WriteFile(led, nil, 0o000)
	cmd := exec.Command(bin, "receipts", "scan", "--ledger", led)
	if os.Geteuid() == 0 {
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin, "receipts", "scan", "--ledger", led)
		os.Chmod(state, 0o755)
		os.Chmod(filepath.Dir(state), 0o755)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	// Another user's (root's, read as uid 65534): run as that user; this
	// user's own (the test's, not root): give it read access. It said
	// "run as the user whose runs wrote it" to the user who wrote it.
	want := "error: cannot read the ledger " + led + ": permission denied on " + led + " (its owner: uid 0); run as the user whose runs wrote it"
	if os.Geteuid() != 0 {
		want = "error: cannot read the ledger " + led + ": permission denied on " + led + ", which is this user's own: give it read access (chmod u+rX " + led + ")"
	}
	if r := runCmd(t, cmd); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("an unreadable --ledger: %+v, want %q", r, want)
	}
	// A readable ledger in a directory this user may not enter: the
	// directory is named, not the ledger, whose own mode is fine.
	shut := filepath.Join(state, "shut")
	os.Mkdir(shut, 0o755)
	inShut := filepath.Join(shut, "l.jsonl")
	os.WriteFile(inShut, nil, 0o644)
	os.Chmod(shut, 0)
	cmd = exec.Command(bin, "receipts", "scan", "--ledger", inShut)
	if os.Geteuid() == 0 {
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin, "receipts", "scan", "--ledger", inShut)
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	if r := runCmd(t, cmd); r.code != 1 || !strings.Contains(r.stderr, "error: cannot read the ledger "+inShut+": permission denied on "+shut+" ") && !strings.Contains(r.stderr, "permission denied on "+shut+", which is this user's own") {
		t.Errorf("a --ledger in a directory this user may not enter: %+v, want the directory %s named", r, shut)
	}
	os.Chmod(shut, 0o755)
	// This user's own ledger below a directory it cannot enter (an
	// XDG_STATE_HOME of another user's): said so, not blamed on another
	// user's runs (it named a ledger that does not exist).
	if err := os.Mkdir(filepath.Join(state, "cruxprov"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(state, "cruxprov"), 0o755) }) // before t.TempDir's removal
	cmd = exec.Command(bin, "receipts", "list")
	if os.Geteuid() == 0 {
		cmd = exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", bin, "receipts", "list")
	}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "XDG_STATE_HOME=" + state}
	if r := runCmd(t, cmd); r.code != 1 || !strings.Contains(r.stderr, "error: cannot reach this user's ledger "+filepath.Join(state, "cruxprov")) ||
		!strings.Contains(r.stderr, "permission denied on a directory above it; set XDG_STATE_HOME") {
		t.Errorf("a ledger below a directory this user cannot enter: %+v", r)
	}
}

// TestImagePushBadDestinationIsUsage: a --push that is neither REPO nor
// REPO:TAG is a usage error before anything is read or built.
func TestImagePushBadDestinationIsUsage(t *testing.T) {
	r := cruxprov(t, "image", "build", "--wheel", filepath.Join(t.TempDir(), "absent.whl"), "--push", "Bad Repo",
		"--index", "http://127.0.0.1:9/simple/", "--platform", "cp311-manylinux_2_36_x86_64", "--base", "oci:x@sha256:"+strings.Repeat("0", 64), "--shim", "cruxshim")
	if r.code != exitUsage || !strings.Contains(r.stderr, "usage: --push: push destination \"Bad Repo\" is not REPO or REPO:TAG") {
		t.Fatalf("%+v", r)
	}
}

// TestKeyGenerateMakesItsDirectory: key generate's example,
// --out ~/keys/alice, on a host without ~/keys: the directory is made,
// private; it used to fail "open …/keys/alice.key: no such file or
// directory".
func TestKeyGenerateMakesItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	cmd := exec.Command(bin, "--home", t.TempDir(), "key", "generate", "--out", filepath.Join(dir, "alice"))
	cmd.Env = append(os.Environ(), "CRUXPROV_KEY_PASSWORD=pw")
	if r := runCmd(t, cmd); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi, err)
	}
	for _, f := range []string{"alice.key", "alice.pub"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// A run that writes no key (no password) leaves no directory it made
	// (it left an empty keys/eve/).
	other := filepath.Join(dir, "eve", "deeper")
	cmd = exec.Command(bin, "--home", t.TempDir(), "key", "generate", "--out", filepath.Join(other, "eve"))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	if r := runCmd(t, cmd); r.code != exitUsage {
		t.Fatalf("key generate without a password: %+v", r)
	}
	if _, err := os.Lstat(filepath.Join(dir, "eve")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a key generate that wrote nothing left %s: %v", filepath.Join(dir, "eve"), err)
	}
}

// TestEnvVerifyByDigest: env verify's example names the env by a digest
// prefix, as env remove and env sbom take it; env verify took a PATH only
// and refused a digest, seal_missing ("…/sha256:… is not a sealed env").
func TestEnvVerifyByDigest(t *testing.T) {
	home, lock := envHome(t, 1, 1)
	out := createJSON(t, createArgs(home, lock, "--no-compile")...)
	// The bare prefix too (as env list's digests read), when no file of
	// that name is in the working directory: it was taken for a path.
	for _, arg := range []string{out.Digest.String(), out.Digest.Hex(), "sha256:" + out.Digest.Hex()[:8], out.Digest.Hex()[:10]} {
		r := cruxprov(t, "--home", home, "env", "verify", arg, "--deep", "--explain", "--json")
		var v struct {
			OK  bool
			Env string
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || !v.OK {
			t.Errorf("env verify %s: %+v", arg, r)
		}
	}
	if r := cruxprov(t, "--home", home, "env", "verify", "sha256:0000000"); r.code != exitUsage {
		t.Errorf("a short prefix: %+v", r)
	}
	// env remove of a bare prefix no env has says so (it said "nothing
	// removed" and exited 0, as for a path that is not there).
	if r := cruxprov(t, "--home", home, "env", "remove", "00000000"); r.code != exitUsage || !strings.Contains(r.stderr, "no env sha256:00000000") {
		t.Errorf("env remove of a prefix no env has: %+v", r)
	}
}

// TestArgumentCountSaysItsNoun: "show takes 1 argument, got 0", not
// "1 argument(s)" (counts agree with their nouns, as elsewhere).
func TestArgumentCountSaysItsNoun(t *testing.T) {
	r := cruxprov(t, "changeset", "show")
	if r.code != exitUsage || !strings.Contains(r.stderr, "show takes 1 argument, got 0") {
		t.Errorf("%+v", r)
	}
}

// TestUnenforcedLimitsIsForContainers: the choice to run without the
// limits a rootless podman cannot apply is a container run's, and the
// refusal that offers it renders as the same command with the flag.
func TestUnenforcedLimitsIsForContainers(t *testing.T) {
	cmd := exec.Command(bin, "--home", t.TempDir(), "run", "acme-echo", "echo", "--input", "-", "--unenforced-limits")
	cmd.Stdin = strings.NewReader("{}")
	if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, "--unenforced-limits is for container runs") {
		t.Errorf("a local run with --unenforced-limits: %+v", r)
	}
	args := []string{"cruxprov", "run", "acme-echo", "echo", "--input", "in.json", "--backend", "container", "--json"}
	if got, want := renderRemedy(&refusal.Remedy{Action: refusal.ActionUnenforcedLimits}, args), "cruxprov run acme-echo echo --input in.json --backend container --unenforced-limits"; got != want {
		t.Errorf("the remedy renders %q, want %q", got, want)
	}
}

// TestSecretPipeRemedy: path mode's refusal where its tmpfs cannot be
// mounted (not root) renders as the run again by pipe, a
// --secret-delivery given replaced (it named no rerun at all).
func TestSecretPipeRemedy(t *testing.T) {
	for _, args := range [][]string{
		{"cruxprov", "run", "acme-echo", "echo", "--input", "in.json", "--backend", "container", "--secret-delivery", "path", "--json"},
		{"cruxprov", "run", "acme-echo", "echo", "--input", "in.json", "--backend", "container", "--secret-delivery=path"},
	} {
		if got, want := renderRemedy(&refusal.Remedy{Action: refusal.ActionSecretPipe}, args), "cruxprov run acme-echo echo --input in.json --backend container --secret-delivery pipe"; got != want {
			t.Errorf("%q: the remedy renders %q, want %q", args, got, want)
		}
	}
}

// TestRunLimitsThatWouldBeIgnored: a limit the executor would ignore
// (under a millisecond, zero, negative) or a key the ledger cannot keep
// as given is a usage error, not a run with the manifest's budgets.
func TestRunLimitsThatWouldBeIgnored(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "999us"}, "--timeout 999µs: give at least 1ms"},
		{[]string{"--timeout", "0s"}, "--timeout 0s"},
		{[]string{"--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"--output-bytes", "0"}, "--output-bytes 0: give a positive"},
		{[]string{"--output-bytes", "-5"}, "--output-bytes -5"},
		{[]string{"--idempotency-key", "k\xff"}, "--idempotency-key: not valid UTF-8"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"--home", t.TempDir(), "run", "acme-echo", "echo", "--input", "-"}, c.args...)...)
			cmd.Stdin = strings.NewReader("{}")
			if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%+v", r)
			}
		})
	}
}

// TestRunInputNotUTF8: an input that is JSON but not UTF-8 is a usage
// error before anything is read or run. json.Valid passed it, the harness
// could not read the request, and the run was recorded as the harness's
// protocol_error.
func TestRunInputNotUTF8(t *testing.T) {
	cmd := exec.Command(bin, "--home", t.TempDir(), "run", "acme-echo", "echo", "--input", "-")
	cmd.Stdin = strings.NewReader("{\"a\":\"\xff\"}")
	if r := runCmd(t, cmd); r.code != exitUsage || !strings.Contains(r.stderr, "usage: --input -: not valid UTF-8") {
		t.Errorf("%+v", r)
	}
}

// TestVerifyNoStore: verify with a --home that names nothing (a typo)
// says there is no store there, not that the store has no registry.
func TestVerifyNoStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-home")
	r := cruxprov(t, "--home", missing, "verify", "acme-echo", "--state-dir", t.TempDir())
	if r.code != exitRefused || !strings.Contains(r.stderr, "refused: pin_unapproved: no accepted pin for acme-echo: there is no store at "+missing+"; check --home") {
		t.Errorf("%+v", r)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("verify made %s", missing)
	}
}

// TestUsageErrorsNameWhatToGive: a bad flag value is named as the help
// names the flag (--expires, not the flag package's -expires) with what
// to give, and an unknown config.yaml key with the keys there are (it
// named a Go type, "main.config").
func TestUsageErrorsNameWhatToGive(t *testing.T) {
	if r := cruxprov(t, "changeset", "approve", "x", "--key", "k", "--expires", "banana"); r.code != exitUsage ||
		!strings.Contains(r.stderr, `invalid value "banana" for flag --expires: parse error: give a duration with its unit`) {
		t.Errorf("--expires banana: %+v", r)
	}
	// A boolean flag was named with one dash and no "flag" ("for
	// -dry-run"), and neither it nor a number said what it wants.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gc", "--dry-run=maybe"}, `invalid boolean value "maybe" for flag --dry-run: parse error: give true or false, or the flag alone (--dry-run)`},
		{[]string{"version", "--json=maybe"}, `invalid boolean value "maybe" for flag --json: parse error: give true or false, or the flag alone (--json)`},
		{[]string{"receipts", "list", "--last", "x"}, `invalid value "x" for flag --last: parse error: give a whole number`},
		{[]string{"policy", "set", "--threshold", "two"}, `invalid value "two" for flag --threshold: parse error: give a whole number`},
	} {
		if r := cruxprov(t, append([]string{"--home", t.TempDir()}, c.args...)...); r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: "+c.want+" (see ") {
			t.Errorf("%v: %+v\nwant %s", c.args, r, c.want)
		}
	}
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "config.yaml"), []byte("format: cruxprov.config/v1\nindx: x\n"), 0o644)
	if r := cruxprov(t, "--home", home, "env", "create", "--wheel", "x.whl", "--platform", "host"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "field indx is not a key of config.yaml (its keys: format, index, platforms, python") || strings.Contains(r.stderr, "main.config") {
		t.Errorf("an unknown config.yaml key: %+v", r)
	}
}

// TestImageBuildOutputAndPush: image build's usage line says --output
// and --push may both be given, as image.Build does (the layout written
// and the same image pushed); it showed them as alternatives,
// "(--output oci:DIR | --push REPO[:TAG])", which both together
// contradicted.
func TestImageBuildOutputAndPush(t *testing.T) {
	r := cruxprov(t, "image", "build", "--help")
	if r.code != 0 || strings.Contains(r.stdout, "(--output oci:DIR | --push") || !strings.Contains(r.stdout, "--output oci:DIR and/or --push REPO[:TAG]") {
		t.Errorf("%+v", r)
	}
	dir := t.TempDir()
	r = cruxprov(t, "image", "build", "--wheel", filepath.Join(dir, "w.whl"), "--platform", "cp311-manylinux_2_36_x86_64", "--index", "http://127.0.0.1:9/simple/", "--base", "oci:x@sha256:"+strings.Repeat("0", 64), "--shim", filepath.Join(dir, "cruxshim"))
	if r.code != exitUsage || !strings.Contains(r.stderr, "give --output oci:DIR, --push REPO, or both") {
		t.Errorf("neither --output nor --push: %+v", r)
	}
}

// TestPlatformNamedTwice: one platform named twice (host is a preset's
// id on most machines) is a usage error; lock resolve printed two
// columns of one label with their outcomes side by side. And --python
// with a preset, which no interpreter changes, is one too (it was
// ignored without a word).
func TestPlatformNamedTwice(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "pylock.toml")
	os.WriteFile(lock, []byte("lock-version = \"1.0\"\ncreated-by = \"test\"\n"), 0o644)
	if r := cruxprov(t, "lock", "resolve", "--lock", lock, "--platform", "cp311-win_amd64,cp311-win_amd64"); r.code != exitUsage || !strings.Contains(r.stderr, "the platform cp311-win_amd64 is named twice") {
		t.Errorf("a preset twice: %+v", r)
	}
	if r := cruxprov(t, "platform", "show", "cp311-win_amd64", "--python", "/usr/bin/python3"); r.code != exitUsage || !strings.Contains(r.stderr, "drop --python") {
		t.Errorf("platform show PRESET --python: %+v", r)
	}
	// lock resolve likewise: --python with no host among the platforms
	// resolved for the presets as if it had not been given.
	for _, args := range [][]string{
		{"--platform", "cp311-win_amd64", "--python", "/nonexistent/python3.13"},
		{"--platform", "cp311-win_amd64,cp312-win_amd64", "--python=python3"},
	} {
		r := cruxprov(t, append([]string{"lock", "resolve", "--lock", lock}, args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "drop --python, or add --platform host") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("lock resolve %v: %+v", args, r)
		}
	}
	if r := cruxprov(t, "lock", "resolve", "--lock", lock, "--platform", "cp311-win_amd64, host", "--python", "/nonexistent/python3.13"); r.code != exitRefused || !strings.Contains(r.stderr, "/nonexistent/python3.13") {
		t.Errorf("lock resolve with host and --python probes it: %+v", r)
	}
}

// TestGroupUsageNamesEverySubcommand: a command group's usage line names
// each of its subcommands, as its --help's COMMANDS list does; env's
// said "create|verify|list|remove" without sbom, and registry's "log"
// without repair, the command registry_corrupt's advice names.
func TestGroupUsageNamesEverySubcommand(t *testing.T) {
	for _, c := range newApp(nil, nil).Commands {
		if len(c.Subcommands) < 2 {
			continue
		}
		for _, s := range c.Subcommands {
			if !regexp.MustCompile(`[ |(]` + regexp.QuoteMeta(s.Name) + `\b`).MatchString(c.UsageText) {
				t.Errorf("cruxprov %s's usage %q does not name %s", c.Name, c.UsageText, s.Name)
			}
		}
	}
}

// TestCLIDocIsTheUsage: docs/cli.md lists every command's usage line as
// --help prints it, and no usage line that no command has (verify's and
// run's usage had left out --backend, which §13 names).
func TestCLIDocIsTheUsage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	usages := map[string]bool{}
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			if len(c.Subcommands) > 0 {
				walk(c.Subcommands)
				continue
			}
			for _, l := range strings.Split(c.UsageText, "\n") {
				l = strings.TrimSpace(l)
				usages[l] = true
				if !strings.Contains(string(doc), l) {
					t.Errorf("docs/cli.md does not have the usage line %q (cruxprov %s --help)", l, c.FullName())
				}
			}
		}
	}
	walk(newApp(nil, nil).Commands)
	inBlock := false
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if l = strings.TrimSpace(l); inBlock && l != "" && !usages[l] {
			t.Errorf("docs/cli.md lists %q, which no command's usage has", l)
		}
	}
}

// TestProposeRemedyRendersImages: the install a refusal advises to
// propose a pin again names the pin's images (Remedy.Images); without
// them the change-set it proposed dropped the container backend.
func TestProposeRemedyRendersImages(t *testing.T) {
	img := "registry.example/acme/echo@sha256:" + strings.Repeat("ab", 32)
	rem := &refusal.Remedy{Action: refusal.ActionPropose, Target: "acme-echo==1.0.0@sha256:" + strings.Repeat("cd", 32), Images: []string{img}}
	got := renderRemedy(rem, []string{"cruxprov", "--home", "/h", "verify", "acme-echo"})
	if !strings.HasPrefix(got, "cruxprov install acme-echo==1.0.0 --sha256 "+strings.Repeat("cd", 32)+" ") ||
		!strings.Contains(got, " --backend container --image "+img+" ") || !strings.HasSuffix(got, " --home /h") {
		t.Errorf("the remedy renders %q", got)
	}
}

// TestProposeRemedyRendersThePinsPlatforms: a propose remedy that carries
// the pin's platforms and interpreter renders them (it rendered
// --platform PLATFORM --python PYTHON whatever the pin held); one without
// them keeps the placeholders.
func TestProposeRemedyRendersThePinsPlatforms(t *testing.T) {
	target := "acme-echo==1.0.0@sha256:" + strings.Repeat("cd", 32)
	rem := &refusal.Remedy{Action: refusal.ActionPropose, Target: target, Platforms: []string{"cp311-manylinux_2_36_x86_64", "cp312-win_amd64"}, Python: "/opt/py 3/bin/python3.11"}
	got := renderRemedy(rem, []string{"cruxprov", "--home", "/h", "verify", "acme-echo"})
	if !strings.Contains(got, " --platform cp311-manylinux_2_36_x86_64,cp312-win_amd64 --python '/opt/py 3/bin/python3.11' ") || strings.Contains(got, "PLATFORM") || strings.Contains(got, "PYTHON") {
		t.Errorf("the remedy renders %q", got)
	}
	got = renderRemedy(&refusal.Remedy{Action: refusal.ActionPropose, Target: target}, []string{"cruxprov", "verify", "acme-echo"})
	if !strings.Contains(got, " --platform PLATFORM --python PYTHON") {
		t.Errorf("without the pin's platforms the remedy renders %q", got)
	}
}

// TestProposeRemedyTakesTheConfigIndex: walking operator.md §6 with a
// config.yaml naming the index, verify's pin_unapproved advised `install
// … --index URL`, though the install it advises takes the index from that
// config.yaml (env create's and fetch's advice left it out already). The
// store's config is read for the advice now: no --index URL where it
// names the index, and --index URL where it does not.
func TestProposeRemedyTakesTheConfigIndex(t *testing.T) {
	rem := &refusal.Remedy{Action: refusal.ActionPropose, Target: "acme-echo==1.0.0@sha256:" + strings.Repeat("cd", 32), Platforms: []string{"cp311-manylinux_2_36_x86_64"}, Python: "/usr/bin/python3.11"}
	with, without := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(with, "config.yaml"), []byte("format: cruxprov.config/v1\nindex: http://127.0.0.1:8080/simple/\n"), 0o644)
	if got := renderRemedy(rem, []string{"cruxprov", "--home", with, "verify", "acme-echo"}); strings.Contains(got, "--index") || !strings.HasSuffix(got, " --home "+with) {
		t.Errorf("with the store's config naming the index, the remedy renders %q", got)
	}
	if got := renderRemedy(rem, []string{"cruxprov", "verify", "acme-echo", "--home=" + without}); !strings.Contains(got, " --index URL") {
		t.Errorf("without a config, the remedy renders %q", got)
	}
}

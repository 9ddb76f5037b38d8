package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/schematest"
	"github.com/urfave/cli/v2"
)

var bin string

func TestMain(m *testing.M) {
	if out := os.Getenv(peakEnv); out != "" {
		os.Exit(runForPeak(out, os.Args[1:])) // rootwheel_test.go's measure
	}
	if b := os.Getenv(cliEnv); b != "" {
		// A child of inUserNS: the parent built the binary.
		bin = b
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "cruxprov-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "cruxprov")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	imagetest.Cleanup()  // the cruxshim the image tests built
	schematest.Cleanup() // the in-toto validator
	os.Exit(code)
}

// result of running the built binary.
type result struct {
	stdout, stderr string
	code           int
}

// cruxprov runs the built binary with a fresh home unless --home is given.
func cruxprov(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
	return runCmd(t, cmd)
}

// runCmd runs cmd and returns its output and exit code (a failure to
// start it fails the test).
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{so.String(), se.String(), code}
}

func TestVersion(t *testing.T) {
	r := cruxprov(t, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "cruxprov ") || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	for _, args := range [][]string{{"version", "--json"}, {"--json", "version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 {
				t.Fatalf("%v: %+v %v", args, r, err)
			}
			if v["schema"] != "cruxprov.version/v1" || v["protocol_version"] != float64(1) {
				t.Fatalf("%v: %v", args, v)
			}
		})
	}
}

func TestUsageErrorsExit64(t *testing.T) {
	for _, args := range [][]string{{"no-such-command"}, {"version", "--no-such-flag"}, {"version", "extra"}, {"--bogus", "version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

func TestRefusalJSONAndExit(t *testing.T) {
	r := cruxprov(t, "refusals", "--json")
	var v struct {
		Schema string   `json:"schema"`
		Codes  []string `json:"codes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Schema != "cruxprov.refusals/v1" || len(v.Codes) < 50 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestReorder(t *testing.T) {
	app := &cli.App{
		Flags: globalFlags,
		Commands: []*cli.Command{{
			Name: "verify",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "deep"},
				&cli.StringFlag{Name: "entrypoint", Aliases: []string{"e"}},
			},
		}, {
			Name:        "env",
			Subcommands: []*cli.Command{{Name: "verify", Flags: []cli.Flag{&cli.BoolFlag{Name: "deep"}}}},
		}},
	}
	cases := []struct{ in, want string }{
		{"verify NAME --deep", "verify --deep -- NAME"},
		{"verify NAME --json --deep", "--json verify --deep -- NAME"},
		{"--home /h verify -e fetch NAME", "--home /h verify -e fetch -- NAME"},
		{"verify NAME --entrypoint fetch --home=/h", "--home=/h verify --entrypoint fetch -- NAME"},
		{"env verify /p --deep --quiet", "--quiet env verify --deep -- /p"},
		{"verify -- --weird-name", "verify -- --weird-name"},
		{"verify", "verify"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			out, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(c.in)...))
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
				return
			}
			if got := strings.Join(out[1:], " "); got != c.want {
				t.Errorf("%s: got %q want %q", c.in, got, c.want)
			}
		})
	}
	for _, bad := range []string{"verify NAME --nope", "nope", "env nope"} {
		t.Run(bad, func(t *testing.T) {
			if _, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(bad)...)); err == nil {
				t.Errorf("%s: accepted", bad)
			}
		})
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

// TestFlagWithoutValueAtEndIsUsage: a flag that takes a value, given
// last, must be a usage error; it used to swallow the reordered "--" or
// the command name ("version --home" printed the top-level help and
// exited 0, "index build X --from" read a directory named "--").
func TestFlagWithoutValueAtEndIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"version", "--home"},
		{"index", "build", "out", "--from"},
		{"inspect", "x.whl", "--home"},
		{"env", "verify", "x", "--jobs"},
		{"platform", "show", "host", "--python"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

// TestJSONFlagSpellingsAnswerInJSON: --json=1 (and =t, =TRUE) turns JSON
// output on in the command, so failures must be JSON too; stdout used to
// be empty for a refusal or a usage error.
func TestJSONFlagSpellingsAnswerInJSON(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "nope-1.0-py3-none-any.whl")
	os.WriteFile(junk, []byte("not a zip"), 0o644)
	for _, j := range []string{"--json=1", "--json=t", "--json=TRUE", "-json"} {
		t.Run(j, func(t *testing.T) {
			r := cruxprov(t, j, "inspect", junk)
			v := jsonDoc(t, r)
			ref, _ := v["refused"].(map[string]any)
			if r.code != exitRefused || v["schema"] != "cruxprov.inspect/v1" || ref["code"] != "wheel_invalid" {
				t.Errorf("%s: %+v", j, r)
			}
			// The human line stays on stderr, for a job's log (docs/refusals.md).
			if !strings.HasPrefix(r.stderr, "refused: wheel_invalid: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: stderr %q", j, r.stderr)
			}
			r = cruxprov(t, "inspect", j)
			if v := jsonDoc(t, r); r.code != exitUsage || v["schema"] != "cruxprov.inspect/v1" {
				t.Errorf("%s usage: %+v", j, r)
			}
		})
	}
}

// TestRefusalLineWithJSON: a refusal prints its one stderr line with
// --json too (as usage errors, failures and lock resolve's refusals do);
// it used to print nothing on stderr.
func TestRefusalLineWithJSON(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "nope-1.0-py3-none-any.whl")
	os.WriteFile(junk, []byte("not a zip"), 0o644)
	r := cruxprov(t, "inspect", junk, "--json")
	jsonDoc(t, r)
	if r.code != exitRefused || !strings.HasPrefix(r.stderr, "refused: wheel_invalid: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("%+v", r)
	}
}

// TestMissingCommandIsUsage: no command, or a command group without its
// subcommand, is a usage error (exit 64, and with --json one JSON
// document); it used to print the help on stdout and exit 0, so
// "cruxprov env --json" gave a script text instead of JSON.
func TestMissingCommandIsUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--json"}, {"env"}, {"env", "--json"}, {"lock", "--quiet"}, {"platform", "--json"}} {
		t.Run(strings.Join(append([]string{"cruxprov"}, args...), " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v: %+v", args, r)
				return
			}
			if hasFlag(append([]string{"cruxprov"}, args...), "json") {
				jsonDoc(t, r)
			} else if r.stdout != "" {
				t.Errorf("%v: stdout %q", args, r.stdout)
			}
		})
	}
	for _, args := range [][]string{{"--help"}, {"env", "--help"}, {"-h"}} {
		t.Run(strings.Join(append([]string{"cruxprov"}, args...), " "), func(t *testing.T) {
			if r := cruxprov(t, args...); r.code != 0 || !strings.Contains(r.stdout, "USAGE") {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

// TestHomeNotADirectory: a --home that is a file, or under one, fails
// with one line naming --home and what to do (and one JSON document with
// --json); it used to print "store H: mkdir H: not a directory" (env list:
// "open H/envs: not a directory") with no next step.
func TestHomeNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "home")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, lock, _ := fetchFixture(t)
	for _, h := range []struct{ name, home string }{
		{"a file", file},
		{"under a file", filepath.Join(file, "sub")},
	} {
		t.Run(h.name, func(t *testing.T) {
			home := h.home
			for _, args := range [][]string{
				{"gc"},
				{"env", "list"},
				{"fetch", "--lock", lock, "--platform", fetchTestPlatform, "--offline"},
			} {
				t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
					r := cruxprov(t, append(args, "--home", home)...)
					if r.code != exitFailure || !strings.Contains(r.stderr, "--home") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
						t.Errorf("%s %v: %+v", home, args, r)
					}
					r = cruxprov(t, append(args, "--home", home, "--json")...)
					if v := jsonDoc(t, r); r.code != exitFailure || !strings.Contains(fmt.Sprint(v["error"]), "--home") {
						t.Errorf("%s %v --json: %+v", home, args, r)
					}
				})
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Errorf("the file given as --home changed: %q", b)
	}
}

// TestEmptyArgumentIsUsage: an empty positional argument (an unset shell
// variable) is a usage error; `index build "" --from W` used to write an
// index into the current directory, and `env verify ""` verified it.
func TestEmptyArgumentIsUsage(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	cwd := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"index build", []string{"index", "build", "", "--from", filepath.Dir(s.Echo.Path)}},
		{"env verify", []string{"env", "verify", ""}},
		{"inspect", []string{"inspect", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = cwd
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
			var se bytes.Buffer
			cmd.Stderr = &se
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.HasPrefix(se.String(), "usage: ") {
				t.Errorf("%q: %v %s", tc.args, err, se.String())
			}
		})
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("written into the working directory: %v", ents)
	}
}

// TestEmptyFlagValueIsUsage: a flag given an empty value (an unset shell
// variable) is a usage error; `--python ""` was refused as a broken
// interpreter after the store was created, and `--home ""` silently used
// the default store.
func TestEmptyFlagValueIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"env", "create", "--lock", "pylock.toml", "--platform", "host", "--offline", "--python", ""},
		{"platform", "show", "host", "--python="},
		{"--home", "", "env", "list"},
		{"env", "list", "--home="},
	} {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "empty") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%q: %+v", args, r)
			}
		})
	}
}

// TestOutputWriteFailureExits1: a result that cannot be written (stdout
// on a full disk) fails with exit 1; it exited 0, so "cruxprov ... --json
// > out.json" on a full disk looked like success with the result lost.
func TestOutputWriteFailureExits1(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full")
	}
	defer full.Close()
	for _, args := range [][]string{{"version"}, {"version", "--json"}, {"platform", "list"}, {"refusals", "--json"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
			var se bytes.Buffer
			cmd.Stdout, cmd.Stderr = full, &se
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFailure || !strings.HasPrefix(se.String(), "error: ") || strings.Count(se.String(), "\n") != 1 {
				t.Errorf("%v: %v %q", args, err, se.String())
			}
		})
	}
}

// TestInputNotARegularFile: a FIFO or a device named as an input file
// fails at once with one line; a FIFO hung the command (even SIGINT did
// not stop it), /dev/zero read until the Go runtime died "out of memory"
// with a goroutine dump.
func TestInputNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	s := fixtures.ForTest(t, fixtures.Options{})
	mf, lf := embedInputs(t, t.TempDir(), "acme-echo", s)
	for _, in := range []struct{ name, bad string }{{"fifo", fifo}, {"dev-zero", "/dev/zero"}} {
		t.Run(in.name, func(t *testing.T) {
			bad := in.bad
			for _, tc := range []struct {
				name string
				code int
				args []string
			}{
				{"lock resolve --lock", exitUsage, []string{"lock", "resolve", "--lock", bad, "--platform", fetchTestPlatform}},
				{"fetch --lock", exitUsage, []string{"fetch", "--lock", bad, "--platform", fetchTestPlatform, "--offline"}},
				{"env create --lock", exitUsage, []string{"env", "create", "--lock", bad, "--platform", fetchTestPlatform, "--offline"}},
				{"env create --wheel", exitUsage, []string{"env", "create", "--wheel", bad, "--platform", fetchTestPlatform, "--offline"}},
				{"inspect", exitUsage, []string{"inspect", bad}},
				{"lock resolve --platform-file", exitUsage, []string{"lock", "resolve", "--lock", lf, "--platform-file", bad}},
				{"package embed --manifest", exitUsage, []string{"package", "embed", s.Echo.Path, "--manifest", bad, "--lock", lf, "-o", t.TempDir()}},
				{"package embed --lock", exitUsage, []string{"package", "embed", s.Echo.Path, "--manifest", mf, "--lock", bad, "-o", t.TempDir()}},
				{"fetch --ca-bundle", exitUsage, []string{"fetch", "--lock", lf, "--platform", fetchTestPlatform, "--index", "http://127.0.0.1:1/simple/", "--ca-bundle", bad}},
			} {
				t.Run(tc.name, func(t *testing.T) {
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
				})
			}
		})
	}
}

// TestMissingInputFileIsUsage: a file named on the command line that does
// not exist is a usage error (exit 64) naming the flag or argument it was
// given as; interface register, key trust and approve's --key printed a
// bare "error: stat nope.json: no such file or directory" (exit 1).
func TestMissingInputFileIsUsage(t *testing.T) {
	dir := t.TempDir()
	// approve refuses a change-set no key can approve before it reads
	// the key (TestApproveRefusedBeforeTheKey): its --key is read for one
	// that is open.
	home, keys, run := keyedHome(t, "a", "b")
	r := run("--quiet", "key", "trust", filepath.Join(keys, "b.pub"))
	open := strings.TrimSpace(r.stdout)
	if r.code != 0 || open == "" {
		t.Fatalf("propose: %+v", r)
	}
	for _, c := range []struct {
		args []string
		name string
	}{
		{[]string{"interface", "register", "acme.echo", "--schema", filepath.Join(dir, "nope.json")}, "--schema"},
		{[]string{"key", "trust", filepath.Join(dir, "nope.pub"), "--name", "nope"}, "key trust"},
		{[]string{"changeset", "approve", open, "--key", filepath.Join(dir, "nope.key"), "--home", home}, "--key"},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			r := cruxprov(t, c.args...)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: "+c.name+" ") || !strings.Contains(r.stderr, "nope.") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v: %+v", c.args, r)
			}
		})
	}
}

// TestEmitKeepsIntegersExact: --json writes every integer as its exact
// digits, past 2^53 (where a float64 would round) and past int64 (a
// provider's result), not through a float64 (emit's UseNumber).
func TestEmitKeepsIntegersExact(t *testing.T) {
	var buf bytes.Buffer
	o := &opts{json: true, stdout: &buf}
	v := struct {
		A int64           `json:"a"`
		B int64           `json:"b"`
		C uint64          `json:"c"`
		R json.RawMessage `json:"r"`
	}{1<<53 + 1, math.MaxInt64, math.MaxUint64, json.RawMessage(`{"n":123456789012345678901234567890,"m":-9007199254740993}`)}
	if err := o.emit("cruxprov.test/v1", v, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"a": 9007199254740993`, `"b": 9223372036854775807`, `"c": 18446744073709551615`, `"n": 123456789012345678901234567890`, `"m": -9007199254740993`, `"schema": "cruxprov.test/v1"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no %s in %s", want, buf.String())
		}
	}
}

// TestVersionFlag: cruxprov --version (and -v) prints the version, as
// cruxprov version does; it was a usage error, "a command is required".
func TestVersionFlag(t *testing.T) {
	for _, f := range []string{"--version", "-v"} {
		if r := cruxprov(t, f); r.code != 0 || !strings.HasPrefix(r.stdout, "cruxprov ") {
			t.Errorf("%s: %+v", f, r)
		}
	}
	r := cruxprov(t, "--version", "--json")
	var v struct{ Schema string }
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Schema != "cruxprov.version/v1" {
		t.Errorf("--version --json: %+v %v", r, err)
	}
}

// TestFlagValueThatIsAFlag: a flag whose value was forgotten does not take
// the next flag for its value: "--home --json verify x" took --json for
// the home and ran without the JSON asked for. It is a usage error saying
// how to give such a value on purpose.
func TestFlagValueThatIsAFlag(t *testing.T) {
	for _, args := range [][]string{{"--home", "--json", "verify", "x"}, {"env", "create", "x.whl", "--platform", "--json"}, {"verify", "x", "--entrypoint", "--deep"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := cruxprov(t, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "needs a value, not the flag") {
				t.Errorf("%v: %+v", args, r)
			}
		})
	}
}

// TestRepeatedSingleValueFlagIsUsage: a flag that takes one value given
// twice is a usage error naming it, for every command, global flags and
// aliases included: urfave/cli kept the last and dropped the others
// without a word (image build --platform A --platform B built B alone).
// Repeatable flags, and booleans, may repeat.
func TestRepeatedSingleValueFlagIsUsage(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, c := range []struct{ in, says string }{
		{"fetch --wheel w --platform a --platform b --index i", "--platform is given twice (a, b)"},
		{"fetch --wheel w --platform a --index i --index=j", "--index is given twice (i, j)"},
		{"env create --wheel w --wheel v --platform a --index i", "--wheel is given twice (w, v)"},
		{"--home h inspect W --home=g", "--home is given twice (h, g)"},
		{"package embed W --manifest m --lock l -o a --output b", "--output is given twice (a, b)"},
	} {
		t.Run(c.in, func(t *testing.T) {
			_, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(c.in)...))
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, c.says) {
				t.Errorf("%s: %v, want a usage error saying %q", c.in, err, c.says)
			}
		})
	}
	for _, in := range []string{
		"install W --platform a --platform b --index i",
		"lock resolve --wheel w --platform a --platform=b",
		"image build --wheel w --platform a --platform b --shim s --shim t --output oci:o",
		"inspect W --json --json",
	} {
		t.Run(in, func(t *testing.T) {
			if _, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(in)...)); err != nil {
				t.Errorf("%s: %v", in, err)
			}
		})
	}
}

// TestProgressOnATerminalOnly: progress bars are drawn on a terminal, not
// on every character device: with 2>/dev/null they were drawn into it.
func TestProgressOnATerminalOnly(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if (&opts{stderr: null}).progressOn() {
		t.Errorf("progress on %s", os.DevNull)
	}
	ptmx, pts := ptyPair(t)
	defer ptmx.Close()
	defer pts.Close()
	if !(&opts{stderr: pts}).progressOn() {
		t.Errorf("no progress on a terminal")
	}
	if (&opts{stderr: pts, noProgress: true}).progressOn() {
		t.Errorf("progress on a terminal with --no-progress")
	}
}

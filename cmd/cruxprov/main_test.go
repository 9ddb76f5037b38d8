package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var bin string

func TestMain(m *testing.M) {
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
		r := cruxprov(t, args...)
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 {
			t.Fatalf("%v: %+v %v", args, r, err)
		}
		if v["schema"] != "cruxprov.version/v1" || v["protocol_version"] != float64(1) {
			t.Fatalf("%v: %v", args, v)
		}
	}
}

func TestUsageErrorsExit64(t *testing.T) {
	for _, args := range [][]string{{"no-such-command"}, {"version", "--no-such-flag"}, {"version", "extra"}, {"--bogus", "version"}} {
		r := cruxprov(t, args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: %+v", args, r)
		}
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
		out, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(c.in)...))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := strings.Join(out[1:], " "); got != c.want {
			t.Errorf("%s: got %q want %q", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"verify NAME --nope", "nope", "env nope"} {
		if _, _, err := reorder(app, append([]string{"cruxprov"}, strings.Fields(bad)...)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestEveryCommandHasExampleHelp keeps the promise that --help on every
// command shows an example, and that --help works after positionals too.
func TestEveryCommandHasExampleHelp(t *testing.T) {
	var walk func(path []string, cs []*cli.Command)
	walk = func(path []string, cs []*cli.Command) {
		for _, c := range cs {
			p := append(append([]string(nil), path...), c.Name)
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			r := cruxprov(t, append(p, "--help")...)
			if r.code != 0 || !strings.Contains(r.stdout, "Example") {
				t.Errorf("%v --help: code %d, no Example:\n%s%s", p, r.code, r.stdout, r.stderr)
			}
		}
	}
	walk(nil, newApp(nil, nil).Commands)
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/seal"
)

// TestDigestsDocCommands: every cruxprov command docs/digests.md shows
// ("$ cruxprov …" in a code block, its output on the lines after) runs as
// written, by sh, with a fresh HOME and nothing but the binary on PATH,
// in a directory holding the interface vector's schema as the doc names
// it, and prints what the doc says; HOME is left untouched.
func TestDigestsDocCommands(t *testing.T) {
	doc, err := os.ReadFile("../../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	schema := regexp.MustCompile("(?s)\\*\\*interface\\*\\*: the schema document as shipped\n\n```\n(.*?\n)```").FindSubmatch(doc)
	if schema == nil {
		t.Fatal("docs/digests.md: no schema document for the interface vector")
	}
	if err := os.WriteFile(filepath.Join(dir, "summarize.schema.json"), schema[1], 0o644); err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?m)^```\n\\$ (cruxprov [^\n]*)\n((?:[^`\n][^\n]*\n)*)```$").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/digests.md shows no cruxprov command")
	}
	for _, b := range blocks {
		home, tmp := t.TempDir(), t.TempDir()
		cmd := exec.Command("sh", "-c", string(b[1]))
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp}
		r := runCmd(t, cmd)
		if r.code != 0 || r.stdout != string(b[2]) {
			t.Errorf("$ %s\nexit %d, stdout:\n%s\nstderr:\n%s\nthe doc says:\n%s", b[1], r.code, r.stdout, r.stderr, b[2])
		}
		if des, _ := os.ReadDir(home); len(des) != 0 {
			t.Errorf("$ %s wrote into HOME: %v", b[1], des)
		}
	}
}

// TestEnvDigestsFromDocProse: for real envs (with and without bytecode,
// from a bare lock and from a root wheel) a second implementation written
// from docs/digests.md's prose alone (testdata/digests/fromdoc.py --env)
// computes, from the env's directory and its seal file, the tree,
// resolution, materialization and seal content digests that env create and
// env verify print.
func TestEnvDigestsFromDocProse(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	home, lock := envHome(t, 2, 4)
	var made []envCreated
	made = append(made, createJSON(t, createArgs(home, lock)...), createJSON(t, createArgs(home, lock, "--no-compile")...))
	// A provider's env: a root wheel, resolved from an index.
	fx, index := echoIndex(t)
	rooted := testdir.New(t)
	made = append(made, createJSON(t, "--home", rooted, "env", "create", "--wheel", fx.Echo.Path, "--platform", "host", "--python", envPython, "--index", index, "--json"))

	for i, c := range made {
		s, err := os.ReadFile(seal.SealPath(c.Path))
		if err != nil {
			t.Fatal(err)
		}
		var ps struct {
			Materialization struct {
				Root     any     `json:"root"`
				Bytecode *string `json:"bytecode"`
			} `json:"materialization"`
		}
		if err := json.Unmarshal(s, &ps); err != nil {
			t.Fatal(err)
		}
		// made is: bytecode, no bytecode, a root with bytecode.
		if root, bc := ps.Materialization.Root != nil, ps.Materialization.Bytecode != nil; root != (i == 2) || bc != (i != 1) {
			t.Fatalf("env %d: root %v, bytecode %v", i, root, bc)
		}
		h := home
		if filepath.Dir(filepath.Dir(c.Path)) == rooted {
			h = rooted
		}
		r := cruxprov(t, "--home", h, "env", "verify", c.Path, "--deep", "--json")
		if r.code != 0 {
			t.Fatalf("env verify: %+v", r)
		}
		v := createdOf(t, r)
		var stderr bytes.Buffer
		cmd := exec.Command(py, "../../testdata/digests/fromdoc.py", "--env", c.Path, seal.SealPath(c.Path))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fromdoc.py --env: %v\n%s", err, stderr.Bytes())
		}
		var prose map[string]string
		if err := json.Unmarshal(out, &prose); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, d := range []struct{ name, code, verified string }{
			{"tree_digest", c.TreeDigest.String(), v.TreeDigest.String()},
			{"resolution_digest", c.Resolution.String(), c.Resolution.String()},
			{"materialization_digest", c.Digest.String(), v.Digest.String()},
			{"seal_content_digest", c.ContentDigest.String(), v.ContentDigest.String()},
		} {
			if prose[d.name] != d.code || d.code != d.verified || d.code == "" {
				t.Errorf("%s: %s: the doc's prose gives %s, env create %s, env verify %s", c.Path, d.name, prose[d.name], d.code, d.verified)
			}
		}
	}
}

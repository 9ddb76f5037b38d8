package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/image/imagetest"
	"github.com/cruxible/cruxprov/internal/fixtures/fixtureindex"
	"github.com/cruxible/cruxprov/internal/testdir"
	"github.com/cruxible/cruxprov/seal"
	"github.com/cruxible/cruxprov/sign"
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

// TestContainerDigestsFromDocProse: for a real image cruxprov builds (two
// platforms, an image index, signed into an OCI layout), a second
// implementation written from docs/digests.md's prose alone
// (testdata/digests/fromdoc.py --image LAYOUT DIGEST) gives, for each
// platform, the container materialization digest that image build
// prints, that install --backend container pins (each platform by its own
// manifest, never the index) and that verify --backend container accepts;
// named by one platform's manifest, it gives that platform's alone. The
// doc said only "the image manifest digest, not computed here".
func TestContainerDigestsFromDocProse(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if _, err := os.Stat(debian); err != nil {
		t.Skipf("needs %s", debian)
	}
	baseRef, _ := imagetest.MultiArchBase(t, filepath.Join(t.TempDir(), "base"))
	dir := testdir.New(t) // the store's envs are read-only
	fx, idx := fixtureindex.Serve(t, dir)
	priv, pub, err := sign.Generate([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	builder := filepath.Join(dir, "builder")
	if os.WriteFile(builder+".key", priv, 0o600) != nil || os.WriteFile(builder+".pub", pub, 0o644) != nil {
		t.Fatal("cannot write the builder key")
	}
	home, state := filepath.Join(dir, "home"), filepath.Join(dir, "state")
	run := func(what string, a ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--home", home}, a...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "CRUXPROV_KEY_PASSWORD=pw", "SOURCE_DATE_EPOCH=1700000000"}
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		return r.stdout
	}
	prose := func(digest string) map[string]string {
		t.Helper()
		var stderr bytes.Buffer
		cmd := exec.Command(py, "../../testdata/digests/fromdoc.py", "--image", filepath.Join(dir, "oci"), digest)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fromdoc.py --image: %v\n%s", err, stderr.Bytes())
		}
		var m map[string]string
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return m
	}

	out := filepath.Join(dir, "oci")
	var built struct {
		Digest    string
		Platforms []struct{ Platform, Digest string }
	}
	b := run("image build", "image", "build", "--wheel", fx.Echo.Path, "--index", idx,
		"--platform", imagetest.Platform+","+imagetest.PlatformARM, "--base", baseRef,
		"--shim", imagetest.Platform+"="+imagetest.Shim(t), "--shim", imagetest.PlatformARM+"="+imagetest.ShimFor(t, "arm64"),
		"--output", "oci:"+out, "--sign-key", builder+".key", "--json")
	if err := json.Unmarshal([]byte(b), &built); err != nil || len(built.Platforms) != 2 {
		t.Fatalf("image build: %v: %s", err, b)
	}

	// The pin: the builder trusted, the interfaces registered, install
	// --backend container naming the index, approved.
	alice := filepath.Join(dir, "alice")
	run("key generate", "key", "generate", "--out", alice, "--quiet")
	run("key trust alice", "key", "trust", alice+".pub", "--name", "alice")
	var trusted struct {
		ChangeSet struct{ Metadata struct{ ID string } } `json:"changeSet"`
	}
	json.Unmarshal([]byte(run("key trust ci", "key", "trust", builder+".pub", "--name", "ci", "--role", "builder", "--json")), &trusted)
	run("approve the builder", "changeset", "approve", trusted.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet")
	for _, i := range []string{"acme.echo", "acme.diagnostics"} {
		run("interface register "+i, "interface", "register", i, "--schema", filepath.Join(dir, "fx", "interfaces", i+".json"), "--quiet")
	}
	var installed struct {
		ChangeSet struct {
			Metadata struct{ ID string }
			Spec     struct {
				Changes []struct {
					Provider struct {
						Materializations []struct{ Backend, Platform, Digest, Image string }
					}
				}
			}
		} `json:"changeSet"`
	}
	in := run("install", "install", fx.Echo.Path, "--index", idx, "--backend", "container", "--image", "oci:"+out+"@"+built.Digest, "--python", debian, "--json")
	if err := json.Unmarshal([]byte(in), &installed); err != nil || len(installed.ChangeSet.Spec.Changes) != 1 {
		t.Fatalf("install: %v: %s", err, in)
	}
	run("approve the install", "changeset", "approve", installed.ChangeSet.Metadata.ID, "--key", alice+".key", "--quiet")

	fromIndex := prose(built.Digest)
	pinned := 0
	for _, m := range installed.ChangeSet.Spec.Changes[0].Provider.Materializations {
		if m.Backend != "container" {
			continue
		}
		pinned++
		if m.Image != "oci:"+out+"@"+m.Digest || m.Digest == built.Digest {
			t.Errorf("%s is pinned as %s, %s: not by its own manifest", m.Platform, m.Image, m.Digest)
		}
		if fromIndex[m.Platform] != m.Digest {
			t.Errorf("%s: the doc's prose gives %q from the index %s, install pins %s", m.Platform, fromIndex[m.Platform], built.Digest, m.Digest)
		}
		v := run("verify "+m.Platform, "verify", "acme-echo", "--backend", "container", "--platform", m.Platform, "--state-dir", state, "--json")
		if !strings.Contains(v, m.Digest) {
			t.Errorf("verify %s does not name %s: %s", m.Platform, m.Digest, v)
		}
	}
	if pinned != 2 || len(fromIndex) != 2 {
		t.Errorf("install pins %d container materializations, the doc's prose gives %d (%v), want 2", pinned, len(fromIndex), fromIndex)
	}
	for _, p := range built.Platforms {
		if fromIndex[p.Platform] != p.Digest {
			t.Errorf("%s: the doc's prose gives %q, image build printed %s", p.Platform, fromIndex[p.Platform], p.Digest)
		}
		// Named by its own manifest, the one platform's.
		if one := prose(p.Digest); len(one) != 1 || one[p.Platform] != p.Digest {
			t.Errorf("fromdoc.py --image for the manifest %s: %v", p.Digest, one)
		}
	}
}

package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/internal/fixtures"
)

// helpExamples is every example line of every command's --help (the
// binary's), continued lines joined, by command path.
func helpExamples(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var walk func(path []string)
	walk = func(path []string) {
		r := cruxprov(t, append(append([]string{}, path...), "--help")...)
		if r.code != 0 {
			t.Fatalf("%v --help: %+v", path, r)
		}
		help := r.stdout
		if i := strings.Index(help, "Example:"); i >= 0 {
			ex := strings.ReplaceAll(help[i+len("Example:"):], "\\\n", " ")
			for _, end := range []string{"\nOPTIONS:", "\nCOMMANDS:", "\nGLOBAL OPTIONS:"} {
				if j := strings.Index(ex, end); j >= 0 {
					ex = ex[:j]
				}
			}
			for _, line := range strings.Split(ex, "\n") {
				if line = strings.Join(strings.Fields(line), " "); line != "" {
					out[strings.Join(path, " ")] = append(out[strings.Join(path, " ")], line)
				}
			}
		}
		if i := strings.Index(help, "\nCOMMANDS:\n"); i >= 0 {
			for _, l := range strings.Split(help[i+len("\nCOMMANDS:\n"):], "\n") {
				f := strings.Fields(l)
				if len(f) == 0 || !strings.HasPrefix(l, "   ") {
					break
				}
				name := strings.TrimSuffix(f[0], ",")
				if name != "help" {
					walk(append(append([]string{}, path...), name))
				}
			}
		}
	}
	walk(nil)
	return out
}

// TestHelpExamplesPaste: an example in --help either works when pasted
// in a fresh directory holding the inputs it names, or reads as a
// template, its placeholders in angle brackets (<id>, <hex>) as the
// other commands write them. Examples named a change-set 3f2a9c1e, an env
// sha256:3f2a9c1d and an attempt att_3f2a9c1d, made-up ids that no store
// holds; `index build /srv/pypi`, a directory outside the one pasted in
// whose parent only root may write; and `lock resolve … --extra fast
// --group dev`, which a lock without that extra and group refuses (usage,
// exit 64). The local examples (inspect, lock resolve, index build) are
// run there, and pass.
func TestHelpExamplesPaste(t *testing.T) {
	examples := helpExamples(t)
	if len(examples) < 20 {
		t.Fatalf("found the examples of %d commands only: %v", len(examples), examples)
	}
	// A path outside the directory pasted in (an interpreter aside).
	outside := func(line string) (string, bool) {
		for _, w := range strings.Fields(line) {
			if _, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "-") {
				w = v
			}
			if strings.HasPrefix(w, "/") && !strings.HasPrefix(w, "/usr/bin/") {
				return w, true
			}
		}
		return "", false
	}
	// A made-up id: 8 or more hex digits, letters and digits both,
	// outside angle brackets.
	madeUp := regexp.MustCompile(`(?:^|[\s:=_@])([0-9a-f]*[a-f][0-9a-f]*)\b`)
	for path, lines := range examples {
		for _, line := range lines {
			for _, m := range madeUp.FindAllStringSubmatch(line, -1) {
				if len(m[1]) >= 8 && strings.ContainsAny(m[1], "0123456789") {
					t.Errorf("cruxprov %s --help: the example %q names %s, an id no store holds: write it as a placeholder (<id>)", path, line, m[1])
				}
			}
			if w, ok := outside(line); ok {
				t.Errorf("cruxprov %s --help: the example %q names %s, outside the directory it is pasted in: name a path in it (./…), or a placeholder", path, line, w)
			}
		}
	}

	// The local examples, run in a fresh directory with their inputs.
	s := fixtures.ForTest(t, fixtures.Options{})
	dir := t.TempDir()
	wheels, _ := filepath.Glob(filepath.Join(filepath.Dir(s.Echo.Path), "*.whl"))
	for _, w := range wheels {
		copyFile(t, w, filepath.Join(dir, "wheels", filepath.Base(w)))
	}
	copyFile(t, s.Echo.Path, filepath.Join(dir, filepath.Base(s.Echo.Path)))
	copyFile(t, s.Echo.Path, filepath.Join(dir, "dist", filepath.Base(s.Echo.Path)))
	zr, err := zip.OpenReader(s.Echo.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/cruxible/pylock.toml") {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			os.WriteFile(filepath.Join(dir, "pylock.toml"), b, 0o644)
		}
	}
	zr.Close()
	cmd := exec.Command(bin, "platform", "show", "cp312-manylinux_2_39_x86_64", "--json")
	if r := runCmd(t, cmd); r.code != 0 || os.WriteFile(filepath.Join(dir, "host.json"), []byte(r.stdout), 0o644) != nil {
		t.Fatalf("platform show: %+v", r)
	}
	binDir := filepath.Dir(bin)
	ran := 0
	for _, path := range []string{"inspect", "lock resolve", "index build"} {
		for _, line := range examples[path] {
			if !strings.HasPrefix(line, "cruxprov "+path) || strings.ContainsAny(line, "<|>") {
				continue // a template, or piped to another program
			}
			if _, ok := outside(line); ok {
				continue // refused above; not written there
			}
			if strings.Contains(line, "/usr/bin/python3.11") {
				if _, err := os.Stat("/usr/bin/python3.11"); err != nil {
					continue
				}
			}
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "CRUXPROV_HOME="+filepath.Join(dir, "home"))
			if r := runCmd(t, cmd); r.code != 0 {
				t.Errorf("cruxprov %s --help: the example %q, pasted in a directory with its inputs: %+v", path, line, r)
			}
			ran++
		}
	}
	if ran < 4 {
		t.Errorf("ran %d examples only", ran)
	}
}

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunExamplesGiveTheirSecrets: every `run` example of a fixture
// provider gives each secret its manifest declares, as a run needs
// whatever its backend: the container example named none, and, pasted,
// was refused secret_unresolved on any host (after, rootless on cgroups
// v1, its container_unavailable fix line).
func TestRunExamplesGiveTheirSecrets(t *testing.T) {
	s := fixtures.ForTest(t, fixtures.Options{})
	r := cruxprov(t, "inspect", s.Echo.Path, "--json")
	var doc struct {
		Manifest struct {
			Secrets []string `json:"secrets"`
		} `json:"manifest"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Manifest.Secrets) == 0 {
		t.Fatalf("inspect %s: %+v", s.Echo.Path, r)
	}
	n := 0
	for _, line := range helpExamples(t)["run"] {
		if !strings.Contains(line, "cruxprov run "+s.Echo.Name+" ") {
			continue
		}
		n++
		for _, ref := range doc.Manifest.Secrets {
			if !strings.Contains(line, "--secret "+ref+"=") {
				t.Errorf("cruxprov run --help: the example %q gives no --secret %s, which %s declares: pasted, it is refused secret_unresolved", line, ref, s.Echo.Name)
			}
		}
	}
	if n < 2 {
		t.Fatalf("found %d run examples of %s", n, s.Echo.Name)
	}
}

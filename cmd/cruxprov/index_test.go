package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/internal/fixtures"
	"github.com/cruxible/cruxprov/internal/treelist"
	"github.com/cruxible/cruxprov/internal/wheeltest"
)

// indexTree lists everything below root ("absent" when it is not there):
// path, mode and content hash, so two trees compare whole.
func indexTree(t *testing.T, root string) string {
	t.Helper()
	s, err := treelist.Of(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bigWheels writes n wheels of about size bytes each (incompressible) into
// a new directory.
func bigWheels(t *testing.T, prefix string, n, size int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		data := make([]byte, size)
		rand.Read(data)
		wheeltest.Write(t, dir, fmt.Sprintf("%s_%03d-1.0-py3-none-any.whl", prefix, i), map[string]string{fmt.Sprintf("%s_%03d/blob.bin", prefix, i): string(data)})
	}
	return dir
}

// TestIndexBuildSIGKILL kills the real binary at random points while it
// rebuilds an index over a previous one: the output is always either the
// previous index or the complete new one, never a mix, and the next build
// removes what the killed ones left.
func TestIndexBuildSIGKILL(t *testing.T) {
	oldIn := bigWheels(t, "old", 3, 1000)
	newIn := bigWheels(t, "new", 60, 128<<10)
	base := t.TempDir()
	out := filepath.Join(base, "mirror")
	fresh := filepath.Join(t.TempDir(), "mirror")
	t0 := time.Now()
	if r := cruxprov(t, "index", "build", fresh, "--from", newIn); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	full := time.Since(t0)
	newTree := indexTree(t, fresh)
	if r := cruxprov(t, "index", "build", out, "--from", oldIn); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	oldTree := indexTree(t, out)
	seen := map[string]int{}
	for trial := range 10 {
		if r := cruxprov(t, "index", "build", out, "--from", oldIn); r.code != 0 {
			t.Fatalf("trial %d: restoring the old index: %+v", trial, r)
		}
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(full)*5/4+1))
		delay := time.Duration(n.Int64())
		cmd := exec.Command(bin, "index", "build", out, "--from", newIn)
		cmd.Env = append(os.Environ(), "CRUXPROV_HOME="+t.TempDir())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		switch indexTree(t, out) {
		case oldTree:
			seen["old"]++
		case newTree:
			seen["new"]++
		default:
			t.Fatalf("trial %d (killed after %v): the output is neither the old nor the new index:\n%s", trial, delay, indexTree(t, out))
		}
	}
	t.Logf("full build %v; after SIGKILL: %v", full, seen)
	if r := cruxprov(t, "index", "build", out, "--from", newIn); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if got := indexTree(t, out); got != newTree {
		t.Errorf("the build after the kills is not the new index")
	}
	ents, _ := os.ReadDir(base)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".mirror.lock mirror" {
		t.Errorf("beside the index: %v, want only the lock file and the index", names)
	}
}

// TestIndexBuildUnreadableWheel: as a user who cannot read one wheel in
// the middle of the input, the build fails, naming it, and the previous
// index that user built stays as it was.
func TestIndexBuildUnreadableWheel(t *testing.T) {
	root, exe := nobodyBase(t, "cruxprov-index-unreadable-", "")
	in := filepath.Join(root, "wheels")
	base := filepath.Join(root, "srv")
	for _, d := range []string{in, base} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"aaa", "mmm", "zzz"} {
		wheeltest.Write(t, in, n+"-1.0-py3-none-any.whl", map[string]string{n + "/__init__.py": ""})
	}
	if err := os.Chown(base, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(in, "mmm-1.0-py3-none-any.whl"), 0o600)
	asNobody := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", exe}, args...)...)
		cmd.Env = []string{"CRUXPROV_HOME=" + filepath.Join(base, "home"), "PATH=/usr/bin:/bin"}
		return runCmd(t, cmd)
	}
	out := filepath.Join(base, "mirror")
	// The first build, when every wheel was readable.
	os.Chmod(filepath.Join(in, "mmm-1.0-py3-none-any.whl"), 0o644)
	if r := asNobody("index", "build", out, "--from", in); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	want := indexTree(t, out)
	os.Chmod(filepath.Join(in, "mmm-1.0-py3-none-any.whl"), 0o600)
	wheeltest.Write(t, in, "nnn-1.0-py3-none-any.whl", map[string]string{"nnn/__init__.py": ""})
	r := asNobody("index", "build", out, "--from", in)
	if r.code == 0 || !strings.Contains(r.stderr, "mmm-1.0-py3-none-any.whl") || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("an unreadable wheel: %+v", r)
	}
	if got := indexTree(t, out); got != want {
		t.Errorf("the failed build changed the index:\n%s\nwas:\n%s", got, want)
	}
	if left, _ := filepath.Glob(filepath.Join(base, ".mirror.build-*")); len(left) != 0 {
		t.Errorf("staging left: %v", left)
	}
}

// TestIndexBuildFromNotADirectory: --from naming nothing, or a file, is
// a usage error naming --from; it used to exit 1 with a bare "index build:
// open F: not a directory". A --from naming nothing says it does not
// exist: it said "is not a directory", as for a file. A directory holding
// no .whl is the wrong --from too (usage, not a failure), and --json
// carries each as one usage document under index build's schema.
func TestIndexBuildFromNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	// Not a wheel: a directory holding other files has no .whl either.
	if err := os.WriteFile(filepath.Join(empty, "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, tc := range []struct{ name, from, says string }{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"a file", file, "is not a directory"},
		// It was "error: index build: no .whl files in D; …", exit 1.
		{"no wheels", empty, "holds no .whl files; give the directory holding the .whl files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cruxprov(t, "index", "build", out, "--from", tc.from)
			if r.code != exitUsage || !strings.HasPrefix(r.stderr, "usage: --from "+tc.from+" ") || !strings.Contains(r.stderr, tc.says) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: %+v", tc.from, r)
			}
			r = cruxprov(t, "index", "build", out, "--from", tc.from, "--json")
			if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%s --json: %+v", tc.from, r)
			}
			v := jsonDoc(t, r)
			e, _ := v["error"].(map[string]any)
			if v["schema"] != "cruxprov.index.build/v2" || e["kind"] != "usage" || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("%s --json: %v", tc.from, v)
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was created", out)
	}
}

// TestWheelSHA256AcrossCommands: a wheel's sha256 is written one way in
// every --json document, sha256:<hex>: index build's files (and their
// metadata files) as inspect's wheel and lock resolve's packages. index
// build wrote bare hex, so a gate comparing them never matched.
func TestWheelSHA256AcrossCommands(t *testing.T) {
	fx := fixtures.ForTest(t, fixtures.Options{})
	doc := func(args ...string) map[string]any {
		t.Helper()
		r := cruxprov(t, append(args, "--json")...)
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
			t.Fatalf("%v: %v %+v", args, err, r)
		}
		return v
	}
	built := doc("index", "build", filepath.Join(t.TempDir(), "index"), "--from", filepath.Dir(fx.Echo.Path))
	if built["schema"] != "cruxprov.index.build/v2" {
		t.Errorf("index build schema %v", built["schema"])
	}
	indexed := map[string]string{}
	for _, f := range built["files"].([]any) {
		f := f.(map[string]any)
		sum, _ := f["sha256"].(string)
		if _, err := digest.Parse(sum); err != nil {
			t.Errorf("index build: %s sha256 %q: %v", f["filename"], sum, err)
		}
		if m, ok := f["metadata_sha256"].(string); ok {
			if _, err := digest.Parse(m); err != nil {
				t.Errorf("index build: %s metadata_sha256 %q: %v", f["filename"], m, err)
			}
		}
		indexed[f["filename"].(string)] = sum
	}
	w := doc("inspect", fx.Echo.Path)["wheel"].(map[string]any)
	if got := indexed[w["filename"].(string)]; got != w["sha256"] {
		t.Errorf("%s: index build says %s, inspect %s", w["filename"], got, w["sha256"])
	}
	plats := doc("lock", "resolve", "--wheel", fx.Echo.Path, "--platform", "cp311-manylinux_2_17_x86_64")["platforms"].([]any)
	pkgs := plats[0].(map[string]any)["packages"].([]any)
	if len(pkgs) == 0 {
		t.Fatal("lock resolve resolved no package")
	}
	for _, p := range pkgs {
		p := p.(map[string]any)
		if got := indexed[p["filename"].(string)]; got != p["sha256"] {
			t.Errorf("%s: index build says %s, lock resolve %s", p["filename"], got, p["sha256"])
		}
	}
}

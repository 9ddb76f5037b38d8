package treehash

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tree digest's known-answer vectors: testdata/digests/NAME.txtar (its
// digest line) and NAME.records (the exact bytes hashed), both computed by
// testdata/digests/gen.mjs, independently of this package. tree-utf8's
// names, contents and link target are not ASCII: its paths sort by UTF-8
// bytes, not UTF-16 code units, and its sizes count bytes.
const vectorDir = "../testdata/digests"

var treeVectors = []string{"tree", "tree-utf8"}

func TestTreeKnownAnswer(t *testing.T) {
	for _, name := range treeVectors {
		tv := loadTree(t, name)
		entries, err := Walk(context.Background(), buildTree(t, tv), 2)
		if err != nil {
			t.Fatal(err)
		}
		var records []byte
		for i := range entries {
			records = appendRecord(records, &entries[i])
		}
		want, err := os.ReadFile(filepath.Join(vectorDir, name+".records"))
		if err != nil {
			t.Fatal(err)
		}
		if string(records) != string(want) {
			t.Errorf("%s: records\n got %q\nwant %q", name, records, want)
		}
		if d := Of(entries); d.String() != tv.digest {
			t.Errorf("%s: digest %s, want %s", name, d, tv.digest)
		}
	}
}

// TestTreeVectorDoc: docs/digests.md's vector table carries each tree's
// digest and shows its records.
func TestTreeVectorDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range treeVectors {
		tv := loadTree(t, name)
		if !regexp.MustCompile("(?m)^\\| `" + name + "` \\|.*\\| `" + tv.digest + "` \\|$").Match(doc) {
			t.Errorf("docs/digests.md: no vector row for %s with %s", name, tv.digest)
		}
		records, _ := os.ReadFile(filepath.Join(vectorDir, name+".records"))
		if shown := strings.ReplaceAll(string(records), "\x00", "\\0\n"); !strings.Contains(string(doc), shown) {
			t.Errorf("docs/digests.md does not show the records of %s:\n%s", name, shown)
		}
	}
}

// treeVector is NAME.txtar: a description of a tree and its digest.
type treeVector struct {
	digest  string
	entries []treeSpec
}

type treeSpec struct {
	path, kind string
	body       []byte
}

func loadTree(t *testing.T, name string) treeVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	var tv treeVector
	header := regexp.MustCompile(`(?m)^-- (\S+) (file|exec|dir|symlink) --\n`)
	locs := header.FindAllSubmatchIndex(b, -1)
	if len(locs) == 0 {
		t.Fatalf("%s.txtar: no entries", name)
	}
	if m := regexp.MustCompile(`(?m)^digest: (sha256:[0-9a-f]{64})$`).FindSubmatch(b[:locs[0][0]]); m != nil {
		tv.digest = string(m[1])
	} else {
		t.Fatalf("%s.txtar: no digest line", name)
	}
	for i, l := range locs {
		end := len(b)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		tv.entries = append(tv.entries, treeSpec{string(b[l[2]:l[3]]), string(b[l[4]:l[5]]), b[l[1]:end]})
	}
	return tv
}

// buildTree creates tv's tree in a new temporary directory.
func buildTree(t *testing.T, tv treeVector) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range tv.entries {
		p := filepath.Join(root, filepath.FromSlash(e.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch e.kind {
		case "file":
			err = os.WriteFile(p, e.body, 0o644)
		case "exec":
			err = os.WriteFile(p, e.body, 0o755)
		case "dir":
			err = os.Mkdir(p, 0o755)
		case "symlink":
			err = os.Symlink(strings.TrimSuffix(string(e.body), "\n"), p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestTreeVectorEntries(t *testing.T) {
	tv := loadTree(t, "tree")
	entries, err := Walk(context.Background(), buildTree(t, tv), 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, string(e.Kind)+" "+e.Path+" "+hex.EncodeToString(e.SHA256[:4]))
	}
	want := []string{"D bin 00000000", "F bin/tool bfdeaeb0", "D empty 00000000", "D lib 00000000",
		"F lib.txt e3b0c442", "L lib/current c396907b", "F lib/data.txt 853ff937"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !entries[1].Exec || entries[4].Exec || entries[6].Exec {
		t.Errorf("exec bits wrong: %+v", entries)
	}
}

// TestTreeShellCommand: the shell command docs/digests.md gives to check
// the tree's records runs as written and prints the tree's digest. It was
// elided ("bfde…288b", "…"), so it could not be run.
func TestTreeShellCommand(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^```\n\\$ (printf '[^'\n]*' \\| sha256sum)\n([0-9a-f]{64})  -\n```$").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/digests.md: no \"$ printf '…' | sha256sum\" block followed by its output")
	}
	tv := loadTree(t, "tree")
	if "sha256:"+string(m[2]) != tv.digest {
		t.Errorf("docs/digests.md: the command's output is %s, the tree's digest %s", m[2], tv.digest)
	}
	for _, sh := range []string{"sh", "bash"} {
		if _, err := exec.LookPath(sh); err != nil {
			continue
		}
		cmd := exec.Command(sh, "-c", string(m[1]))
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
		out, err := cmd.Output()
		if err != nil || string(out) != string(m[2])+"  -\n" {
			t.Errorf("%s -c %q: %q (%v), want %q", sh, m[1], out, err, string(m[2])+"  -\n")
		}
	}
}

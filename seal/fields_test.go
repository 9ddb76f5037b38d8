package seal

import (
	"bytes"
	"fmt"
	"path/filepath"

	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"

	"github.com/cruxible/cruxprov/refusal"
)

// TestSealFieldsCovered edits every field of a seal, one at a time
// (DESIGN §9, issue 11 item 5): a field that is an input of the
// materialization digest, or that verify recomputes from the tree or the
// stat index, is refused by fast and deep verify; every other field that
// describes the env changes the seal content digest (which the accepted
// pin records); the stat hints (interpreter mtime, ctime, inode) only
// cause a rehash, and the tool version is information only (§9 leaves
// it out of the content digest so that a newer cruxprov's rebuild needs
// no new approval).
func TestSealFieldsCovered(t *testing.T) {
	const (
		refused = "refused"
		content = "content digest"
		ignored = "ignored"
	)
	cases := []struct {
		path string
		val  any
		want string
	}{
		{"format", "cruxprov.seal/v1", refused},
		{"format", "cruxprov.seal/v3", refused},
		{"format", "cruxprov.seal/v2", refused},   // v2 has no env.location
		{"format", "cruxprov.seal/v2.7", ignored}, // a later minor: hashed as its major
		{"materialization.digest", "sha256:" + strings.Repeat("0", 64), refused},
		{"materialization.platform", "cp311-manylinux_2_17_x86_64", refused},
		{"materialization.interpreter.Path", "/usr/bin/python3", refused},
		{"materialization.interpreter.Version", "3.11.8", refused},
		{"materialization.resolution", "sha256:" + strings.Repeat("1", 64), refused},
		{"materialization.root", map[string]any{"name": "x", "version": "1", "sha256": "sha256:" + strings.Repeat("2", 64)}, refused},
		{"materialization.bytecode", "unchecked-hash", refused},
		{"resolution.digest", "sha256:" + strings.Repeat("3", 64), refused},
		{"resolution.platform", "cp311-manylinux_2_17_x86_64", refused},
		{"resolution.packages.0.name", "other", refused},
		{"resolution.packages.0.version", "2.0", refused},
		{"resolution.packages.0.filename", "example-2.0-py3-none-any.whl", refused},
		{"resolution.packages.0.sha256", "sha256:" + strings.Repeat("4", 64), refused},
		{"resolution.packages.0.size", 124, content},
		{"tree.digest", "sha256:" + strings.Repeat("5", 64), refused},
		{"tree.files", 99, refused},
		{"tree.dirs", 99, refused},
		{"tree.symlinks", 99, refused},
		{"tree.bytes", 99, refused},
		{"tree.root_mode", 0o755, refused},
		{"interpreter.path", "/usr/bin/python3", refused},
		{"interpreter.version", "3.11.8", refused},
		{"interpreter.size", 1, refused},
		{"interpreter.sha256", "sha256:" + strings.Repeat("6", 64), content},
		{"interpreter.implementation", "pypy", content},
		{"interpreter.mtime_ns", 1, ignored},
		{"interpreter.ctime_ns", 1, ignored},
		{"interpreter.ino", 1, ignored},
		{"index.format", "cruxprov.statindex/v9", refused},
		{"index.sha256", "sha256:" + strings.Repeat("7", 64), refused},
		{"index.entries", 1, refused},
		{"env.python", "bin/normalizer", refused},
		{"env.site_packages", "lib/python3.11/dist-packages", refused},
		{"env.compiled", true, refused},
		{"env.location", "/elsewhere/envs/0123", refused}, // env_drift: not where it is
		{"env.location", "envs/0123", refused},            // not absolute
		{"tool", "cruxprov v0.0.0-edited", ignored},
	}
	e := sealTree(t, func(t testing.TB, root string) {
		if err := os.WriteFile(root+"/a.py", []byte("print(1)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	base, err := Verify(context.Background(), e.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(SealPath(e.dir))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.path] = true
		t.Run(c.path, func(t *testing.T) {
			defer writeSeal(t, e.dir, orig)
			var m map[string]any
			dec := json.NewDecoder(bytes.NewReader(orig))
			dec.UseNumber() // stats and sizes stay exact
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			setPath(t, m, c.path, c.val)
			b, _ := json.Marshal(m)
			writeSeal(t, e.dir, b)
			for _, deep := range []bool{false, true} {
				rep, err := Verify(context.Background(), e.dir, Options{Deep: deep})
				switch c.want {
				case refused:
					if err == nil || refusal.CodeOf(err) == "" {
						t.Errorf("deep=%v: edit accepted (%v)", deep, err)
					}
				case content:
					if err != nil && deep && c.path == "interpreter.sha256" {
						// --deep rehashes the interpreter and finds the edit
					} else if err != nil {
						t.Errorf("deep=%v: %v", deep, err)
					} else if rep.ContentDigest == base.ContentDigest {
						t.Errorf("deep=%v: the seal content digest did not change", deep)
					}
				case ignored:
					if err != nil {
						t.Errorf("deep=%v: %v", deep, err)
					} else if rep.ContentDigest != base.ContentDigest {
						t.Errorf("deep=%v: the seal content digest changed", deep)
					}
				}
			}
		})
	}
	// Every leaf of the seal document is in the table.
	var m map[string]any
	json.Unmarshal(orig, &m)
	var leaves func(prefix string, v any)
	leaves = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, w := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				if p == "materialization.root" || p == "interpreter.libpython" {
					continue // null here; root is edited whole above
				}
				leaves(p, w)
			}
		case []any:
			for i, w := range x {
				leaves(prefix+"."+string(rune('0'+i)), w)
			}
		default:
			if !seen[prefix] {
				t.Errorf("seal field %s is not in the table", prefix)
			}
		}
	}
	leaves("", m)
}

func writeSeal(t *testing.T, dir string, b []byte) {
	t.Helper()
	p := SealPath(dir)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o444); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o444)
}

// setPath sets the dotted path in a decoded JSON document (a number
// component indexes an array).
func setPath(t *testing.T, m map[string]any, path string, v any) {
	t.Helper()
	parts := strings.Split(path, ".")
	var cur any = m
	for i, p := range parts {
		last := i == len(parts)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				x[p] = v
				return
			}
			cur = x[p]
		case []any:
			n := int(p[0] - '0')
			if last {
				x[n] = v
				return
			}
			cur = x[n]
		default:
			t.Fatalf("no %s in the seal", path)
		}
	}
}

// TestV1SealStillVerifies: an env sealed before the v2 local digest (seal
// format v1, named by the v1 digest, no bytecode) still verifies (DESIGN
// §14), and cannot be passed off as a v2 seal or the reverse.
func TestV1SealStillVerifies(t *testing.T) {
	e := sealTree(t, func(t testing.TB, root string) {
		if err := os.WriteFile(root+"/a.py", []byte("print(1)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	s, err := Load(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite it as the v1 tool wrote it: the v1 digest names the env.
	v1, err := digest.LocalMaterializationDigestV1(s.Materialization.Platform, s.Materialization.Interpreter, s.Resolution.Digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Format, s.Materialization.Digest, s.Materialization.Bytecode, s.Resolution.Root = FormatV1, v1, nil, nil
	s.Env.Location = "" // v1 had no such field
	dir := filepath.Join(filepath.Dir(e.dir), v1.Hex())
	os.Chmod(e.dir, 0o755)
	if err := os.Rename(e.dir, dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o555)
	os.Rename(StatIndexPath(e.dir), StatIndexPath(dir))
	os.Remove(SealPath(e.dir))
	b, _ := s.Marshal()
	writeSeal(t, dir, b)
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("deep=%v", deep), func(t *testing.T) {
			if _, err := Verify(context.Background(), dir, Options{Deep: deep}); err != nil {
				t.Fatalf("v1 seal (deep=%v): %v", deep, err)
			}
		})
	}
	// The same document labelled v2 does not hash to the env's name.
	s.Format = FormatV2
	b, _ = s.Marshal()
	writeSeal(t, dir, b)
	if _, err := Verify(context.Background(), dir, Options{}); refusal.CodeOf(err) != refusal.SealInvalid {
		t.Fatalf("a v1 seal relabelled v2: %v", err)
	}
}

// TestContentDigestVector: the seal content digest of the known-answer
// vector in testdata/digests/seal-content.json, whose canonical bytes and
// digest were computed independently (testdata/digests/gen.mjs, Node.js):
// the code's canonical bytes are the vector's, and so is the digest.
// docs/digests.md's vector table carries each vector's digest (the
// canonical bytes were not compared, and the doc named the digest in
// prose no test read).
func TestContentDigestVector(t *testing.T) {
	b, err := os.ReadFile("../testdata/digests/seal-content.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Name      string          `json:"name"`
		Note      string          `json:"note"`
		Input     json.RawMessage `json:"input"`
		Canonical string          `json:"canonical"`
		Digest    string          `json:"digest"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vs); err != nil || len(vs) == 0 {
		t.Fatalf("%v", err)
	}
	names := map[string]bool{}
	for _, v := range vs {
		names[v.Name] = true
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `(seal-content[a-z0-9.-]*)` \\|").FindAllSubmatch(doc, -1) {
		if !names[string(m[1])] {
			t.Errorf("docs/digests.md's vector table has %s, which seal-content.json does not", m[1])
		}
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			s, err := Parse(v.Input)
			if err != nil {
				t.Fatal(err)
			}
			c, err := contentJSON(s)
			if err != nil || string(c) != v.Canonical {
				t.Errorf("canonical bytes (%v)\n got %s\nwant %s", err, c, v.Canonical)
			}
			if d := digest.Sum([]byte(v.Canonical)).String(); d != v.Digest {
				t.Errorf("the vector's digest %s is not the sha256 of its canonical bytes, %s", v.Digest, d)
			}
			got, err := ContentDigest(s)
			if err != nil || got.String() != v.Digest {
				t.Fatalf("got %s (%v), want %s", got, err, v.Digest)
			}
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(v.Name) + "` \\|.*\\| `(sha256:[0-9a-f]{64})` \\|$").FindSubmatch(doc)
			if row == nil || string(row[1]) != v.Digest {
				t.Errorf("docs/digests.md: the vector table's row for %s is %q, want its digest %s", v.Name, row, v.Digest)
			}
		})
	}
}

// TestParseRefusesAKeySaidTwice: a seal whose object names a member twice,
// or one member in two cases (the interpreter's "Path" beside "path"), was
// read with the last value kept and the first dropped, so that another
// reader of the bytes could read another seal than the one hashed; such a
// seal is refused. The same member in another case alone is still read:
// every seal writes the interpreter's "Path" and "Version".
func TestParseRefusesAKeySaidTwice(t *testing.T) {
	b, err := os.ReadFile("../testdata/digests/seal-content.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(b, &vs); err != nil || len(vs) == 0 {
		t.Fatal(err)
	}
	good := string(vs[0].Input)
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("the vector's seal: %v", err)
	}
	if _, err := Parse([]byte(good + " ]")); err == nil {
		t.Error("a seal and a stray ] after it was read")
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"a member twice", `"tool":`, `"tool":"other","tool":`, `the document has the key "tool" twice`},
		{"two cases of one member", `"interpreter":{"Path":`, `"interpreter":{"path":"/usr/bin/other","Path":`, `the object at materialization.interpreter has the keys "path" and "Path"`},
		{"an embedded member's two cases", `"interpreter":{"path":`, `"interpreter":{"PATH":"/usr/bin/other","path":`, `has the keys "PATH" and "path"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(good, c.old) {
				t.Fatalf("the vector has no %s", c.old)
			}
			doc := strings.Replace(good, c.old, c.new, 1)
			if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse = %v, want %q", err, c.want)
			}
		})
	}
}

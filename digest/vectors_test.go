package digest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/canonical"
)

// The known-answer vectors of testdata/digests (outputs computed by
// testdata/digests/gen.mjs, an implementation independent of this package).
const vectorDir = "../testdata/digests"

type vector[I any] struct {
	Name      string `json:"name"`
	Note      string `json:"note"`
	Input     I      `json:"input"`
	Canonical string `json:"canonical"`
	Digest    string `json:"digest"`
}

func loadVectors[I any](t *testing.T, file string) []vector[I] {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector[I]
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s: no vectors", file)
	}
	return vs
}

type implementationInput struct {
	InterfaceID     string `json:"interface_id"`
	InterfaceDigest Digest `json:"interface_digest"`
	Entrypoint      string `json:"entrypoint"`
	Object          string `json:"object"`
	Distribution    Digest `json:"distribution"`
}

type resolutionInput struct {
	Packages []struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		Filename string `json:"filename"`
		SHA256   Digest `json:"sha256"`
	} `json:"packages"`
}

type localInput struct {
	Platform    string      `json:"platform"`
	Interpreter Interpreter `json:"interpreter"`
	Resolution  Digest      `json:"resolution"`
	Root        *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		SHA256  Digest `json:"sha256"`
	} `json:"root"`
	Bytecode *string `json:"bytecode"` // v2 vectors only
}

// computed maps every vector name to the canonical bytes and digest this
// package computes for it.
type computed struct {
	canonical []byte
	digest    Digest
}

func computeVectors(t *testing.T) map[string]computed {
	t.Helper()
	out := map[string]computed{}
	add := func(name string, b []byte, d Digest, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("vector name %q used twice", name)
		}
		if d != Sum(b) {
			t.Fatalf("%s: digest is not the sha256 of the canonical bytes", name)
		}
		out[name] = computed{b, d}
	}
	for _, v := range loadVectors[implementationInput](t, "implementation.json") {
		in := v.Input
		b, err := implementationJSON(in.InterfaceID, in.InterfaceDigest, in.Entrypoint, in.Object, in.Distribution)
		d, err2 := ImplementationDigest(in.InterfaceID, in.InterfaceDigest, in.Entrypoint, in.Object, in.Distribution)
		add(v.Name, b, d, firstErr(err, err2))
	}
	for _, v := range loadVectors[resolutionInput](t, "resolution.json") {
		var pkgs []ResolvedWheel
		for _, p := range v.Input.Packages {
			pkgs = append(pkgs, ResolvedWheel{Name: p.Name, Version: p.Version, Filename: p.Filename, SHA256: p.SHA256})
		}
		b, err := resolutionJSON(pkgs)
		d, err2 := ResolutionDigest(pkgs)
		add(v.Name, b, d, firstErr(err, err2))
	}
	for _, v := range loadVectors[localInput](t, "materialization-local.json") {
		in := v.Input
		var root *Root
		if in.Root != nil {
			root = &Root{in.Root.Name, in.Root.Version, in.Root.SHA256}
		}
		interp := in.Interpreter
		b, err := localMaterializationJSON(in.Platform, interp, in.Resolution, root, nil)
		d, err2 := LocalMaterializationDigestV1(in.Platform, interp, in.Resolution, root)
		add(v.Name, b, d, firstErr(err, err2))
	}
	for _, v := range loadVectors[localInput](t, "materialization-local-v2.json") {
		in := v.Input
		var root *Root
		if in.Root != nil {
			root = &Root{in.Root.Name, in.Root.Version, in.Root.SHA256}
		}
		interp := in.Interpreter
		bc := ""
		if in.Bytecode != nil {
			bc = *in.Bytecode
		}
		b, err := localMaterializationJSON(in.Platform, interp, in.Resolution, root, &bc)
		d, err2 := LocalMaterializationDigest(in.Platform, interp, in.Resolution, root, bc)
		add(v.Name, b, d, firstErr(err, err2))
	}
	for _, v := range loadVectors[string](t, "interface.json") {
		b, err := canonical.Transform([]byte(v.Input))
		d, err2 := InterfaceDigest([]byte(v.Input))
		add(v.Name, b, d, firstErr(err, err2))
	}
	return out
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestKnownAnswers(t *testing.T) {
	got := computeVectors(t)
	check := func(name, canonical, digest string) {
		t.Helper()
		c, ok := got[name]
		if !ok {
			t.Errorf("%s: not computed", name)
			return
		}
		if string(c.canonical) != canonical {
			t.Errorf("%s: canonical bytes\n got %q\nwant %q", name, c.canonical, canonical)
		}
		if c.digest.String() != digest {
			t.Errorf("%s: digest %s, want %s", name, c.digest, digest)
		}
	}
	for _, f := range []string{"implementation.json", "resolution.json", "materialization-local.json", "materialization-local-v2.json", "interface.json"} {
		for _, v := range loadVectors[json.RawMessage](t, f) {
			check(v.Name, v.Canonical, v.Digest)
		}
	}
}

// TestDocVectors keeps docs/digests.md true: every row of its vector table
// names a vector and carries the digest this package computes for it, and
// every vector is in the table.
func TestDocVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/digests.md")
	if err != nil {
		t.Fatal(err)
	}
	got := computeVectors(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.-]+)` \\|.*\\| `(sha256:[0-9a-f]{64})` \\|$")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, digest := m[1], m[2]
		c, ok := got[name]
		if name == "tree" || strings.HasPrefix(name, "tree-") {
			continue // package treehash's vectors, checked there (TestTreeVectorDoc)
		}
		if strings.HasPrefix(name, "seal-content") {
			continue // package seal's vectors, checked there (TestContentDigestVector)
		}
		if strings.HasPrefix(name, "materialization-container") {
			continue // image manifests, not typed documents: TestContainerVectors
		}
		if !ok {
			t.Errorf("docs/digests.md names vector %q, which testdata/digests does not have", name)
			continue
		}
		if c.digest.String() != digest {
			t.Errorf("docs/digests.md: %s is %s, the code computes %s", name, digest, c.digest)
		}
		seen[name] = true
	}
	for name, c := range got {
		if !seen[name] {
			t.Errorf("docs/digests.md: vector table lacks %q (%s)", name, c.digest)
		}
		// The canonical bytes are written out in the doc too (records of
		// the tree with \0 shown as "\0").
		shown := string(c.canonical)
		if !strings.Contains(string(doc), shown) {
			t.Errorf("docs/digests.md does not show the canonical bytes of %q:\n%s", name, shown)
		}
	}
	// Every sha256 in the doc is either a vector's output or an input of one.
	inputs := map[string]bool{}
	for _, f := range []string{"implementation.json", "resolution.json", "materialization-local.json", "materialization-local-v2.json", "seal-content.json", "materialization-container.json"} {
		b, _ := os.ReadFile(filepath.Join(vectorDir, f))
		for _, d := range regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindAllString(string(b), -1) {
			inputs[d] = true
		}
	}
	for _, c := range got {
		inputs[c.digest.String()] = true
	}
	inputs[Sum(nil).String()] = true
	// A container vector's image (an index: the doc names its digest,
	// which is no platform's) hashes to an input's digest too.
	for _, v := range loadVectors[struct {
		Platform string   `json:"platform"`
		Image    string   `json:"image"`
		Blobs    []string `json:"blobs"`
	}](t, "materialization-container.json") {
		inputs[Sum([]byte(v.Input.Image)).String()] = true
	}
	for _, f := range []string{"tree.txtar", "tree-utf8.txtar"} { // treehash's vectors
		tree, err := os.ReadFile(filepath.Join(vectorDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindAllString(string(tree), -1) {
			inputs[d] = true
		}
	}
	for _, d := range regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindAllString(string(doc), -1) {
		if !inputs[d] {
			t.Errorf("docs/digests.md mentions %s, which is neither a vector's input nor its output", d)
		}
	}
	// The canonical JSON examples: rows "| `input` | `canonical` |", where
	// the canonical side may name a character it cannot show (U+2028,
	// U+007F) between backquoted runs: "`"é` U+2028 `/` U+007F `"`".
	n := 0
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ((?:`[^`]+`|U\\+[0-9A-F]{4,6})(?: (?:`[^`]+`|U\\+[0-9A-F]{4,6}))*) \\|$").FindAllStringSubmatch(string(doc), -1) {
		n++
		want := docCanonical(m[2])
		if got, err := canonical.Transform([]byte(m[1])); err != nil || string(got) != want {
			t.Errorf("docs/digests.md: %s canonicalizes to %q (%v), the doc says %q", m[1], got, err, want)
		}
	}
	if n < 5 {
		t.Errorf("docs/digests.md: found %d canonical JSON examples, want at least 5", n)
	}
}

// docCanonical is the text a canonical-JSON cell of docs/digests.md
// shows: its backquoted runs joined, each U+XXXX between them the
// character it names.
func docCanonical(cell string) string {
	var b strings.Builder
	for _, tok := range regexp.MustCompile("`[^`]+`|U\\+[0-9A-F]{4,6}").FindAllString(cell, -1) {
		if strings.HasPrefix(tok, "U+") {
			r, _ := strconv.ParseUint(tok[2:], 16, 32)
			b.WriteRune(rune(r))
		} else {
			b.WriteString(tok[1 : len(tok)-1])
		}
	}
	return b.String()
}

package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/treehash"
)

func sampleIndex() *StatIndex {
	return &StatIndex{Entries: []Entry{
		{Path: "bin", Kind: treehash.Dir, Mode: 0o555, MtimeNS: 1, CtimeNS: 2, Ino: 3},
		{Path: "bin/python", Kind: treehash.Symlink, Mode: 0o777, Size: 9, MtimeNS: -5, CtimeNS: 6, Ino: 7, SHA256: sha256.Sum256([]byte("python3.11"))},
		{Path: "lib", Kind: treehash.Dir, Mode: 0o555},
		{Path: "lib/a.py", Kind: treehash.File, Mode: 0o444, Size: 3, MtimeNS: 1 << 60, CtimeNS: 1 << 61, Ino: 1 << 40, SHA256: sha256.Sum256([]byte("a\n\n"))},
		{Path: "lib/a.pyc", Kind: treehash.File, Mode: 0o555, Size: 0},
	}}
}

func TestIndexRoundTrip(t *testing.T) {
	ix := sampleIndex()
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseStatIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != len(ix.Entries) {
		t.Fatalf("%d entries", len(got.Entries))
	}
	for i := range ix.Entries {
		if got.Entries[i] != ix.Entries[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got.Entries[i], ix.Entries[i])
		}
	}
	if got.TreeDigest() != ix.TreeDigest() {
		t.Error("tree digest changed in the round trip")
	}
}

func TestParseIndexRefusals(t *testing.T) {
	good, _ := sampleIndex().MarshalBinary()
	unsorted := sampleIndex()
	unsorted.Entries[0], unsorted.Entries[2] = unsorted.Entries[2], unsorted.Entries[0]
	if _, err := unsorted.MarshalBinary(); err == nil {
		t.Error("MarshalBinary accepted unsorted entries")
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"other format":   []byte(strings.Replace(string(good), "v1", "v2", 1)),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(bytes.Clone(good), 0),
		"huge count":     append([]byte(StatIndexFormat+"\n"), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"dotdot path":    mustIndex(t, Entry{Path: "a/../b", Kind: treehash.Dir}),
		"bad kind":       mustIndex(t, Entry{Path: "a", Kind: 'X'}),
		"empty path":     mustIndex(t, Entry{Path: "", Kind: treehash.Dir}),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseStatIndex(b); err == nil {
				t.Errorf("%s: accepted", name)
			}
		})
	}
}

func mustIndex(t *testing.T, e Entry) []byte {
	t.Helper()
	b, err := (&StatIndex{Entries: []Entry{e}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSealFormats(t *testing.T) {
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{`{"format":"cruxprov.seal/v2"}`, false},
		{`{"format":"cruxprov.seal"}`, false},
		{`not json`, false},
		{`{"format":"cruxprov.seal/v1","surprise":1}`, false},
		{`{"format":"cruxprov.seal/v1"}`, false}, // fields missing
	} {
		t.Run(c.doc, func(t *testing.T) {
			if _, err := Parse([]byte(c.doc)); (err == nil) != c.ok {
				t.Errorf("%s: err %v", c.doc, err)
			}
		})
	}
}

func FuzzParseIndex(f *testing.F) {
	good, _ := sampleIndex().MarshalBinary()
	f.Add(good)
	f.Add([]byte(StatIndexFormat + "\n\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := ParseStatIndex(b)
		if err != nil {
			return
		}
		out, err := ix.MarshalBinary()
		if err != nil {
			t.Fatalf("a parsed index does not marshal: %v", err)
		}
		if got, want := ix.TreeDigest(), treeDigestOf(ix); got != want {
			t.Fatalf("tree digest %s, treehash.Of says %s", got, want)
		}
		if !bytes.Equal(out, b) {
			// Varints have one canonical form each, so a parsed index
			// re-encodes to its own bytes unless it used a non-minimal
			// shared-prefix length.
			if _, err := ParseStatIndex(out); err != nil {
				t.Fatalf("re-encoded index does not parse: %v", err)
			}
		}
	})
}

func FuzzParseSeal(f *testing.F) {
	f.Add([]byte(`{"format":"cruxprov.seal/v1"}`))
	f.Add([]byte(`{"format":"cruxprov.seal/v1.3","materialization":{"digest":null}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		_, _ = s.ComputeDigest()
		if _, err := s.Marshal(); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkParseIndex(b *testing.B) {
	ix := &StatIndex{}
	for i := 0; i < 4000; i++ {
		ix.Entries = append(ix.Entries, Entry{Path: fmt.Sprintf("lib/python3.11/site-packages/pkg%03d/mod%04d.py", i/40, i), Kind: treehash.File, Mode: 0o444, Size: int64(i), MtimeNS: int64(i) << 20, CtimeNS: int64(i) << 21, Ino: uint64(i)})
	}
	raw, err := ix.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ParseStatIndex(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// treeDigestOf is the tree digest as package digest computes it.
func treeDigestOf(ix *StatIndex) digest.Digest {
	te := make([]treehash.Entry, len(ix.Entries))
	for i := range ix.Entries {
		te[i] = ix.Entries[i].TreeEntry()
	}
	return treehash.Of(te)
}

// TestTreeDigestIsDigests: Index.TreeDigest hashes records as it reads
// them; it must equal treehash.Of on the same entries, sorted or
// not, for every kind, mode and size.
func TestTreeDigestIsDigests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []treehash.Kind{treehash.File, treehash.Dir, treehash.Symlink}
	for n := range 200 {
		ix := &StatIndex{}
		for i := range n {
			e := Entry{Path: fmt.Sprintf("d%d/é%03d/%x", rng.IntN(5), i, rng.Uint32()), Kind: kinds[rng.IntN(3)], Mode: uint32(rng.IntN(0o1000))}
			if e.Kind != treehash.Dir {
				e.Size = rng.Int64N(1 << 40)
				e.SHA256 = sha256.Sum256([]byte(e.Path))
			}
			ix.Entries = append(ix.Entries, e)
		}
		if n%2 == 0 {
			sortEntries(ix.Entries)
		}
		if got, want := ix.TreeDigest(), treeDigestOf(ix); got != want {
			t.Fatalf("%d entries: %s, digest says %s", n, got, want)
		}
	}
}

// TestMaterializationWireKeys: materialization.interpreter is written
// with the keys "Path" and "Version" that every seal has had, though
// digest.Interpreter is tagged "path" and "version" elsewhere, and read
// back as written; Materialization.MarshalJSON writes every field of
// Materialization, under its own tag, in its order.
func TestMaterializationWireKeys(t *testing.T) {
	bc := digest.BytecodeUncheckedHash
	m := Materialization{
		Digest: digest.Sum([]byte("m")), Platform: "cp311-manylinux_2_36_x86_64",
		Interpreter: digest.Interpreter{Path: "/usr/bin/python3.11", Version: "3.11.2"},
		Resolution:  digest.Sum([]byte("r")), Root: &Root{Name: "a", Version: "1", SHA256: digest.Sum([]byte("a"))}, Bytecode: &bc,
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	for depth := 0; ; {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'):
			depth++
		case json.Delim('}'):
			depth--
		default:
			if k, ok := tok.(string); ok && depth == 1 {
				keys = append(keys, k)
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var want []string
	for f := range reflect.TypeFor[Materialization]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		want = append(want, name)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("MarshalJSON writes %q, Materialization has %q", keys, want)
	}
	if !bytes.Contains(b, []byte(`"interpreter":{"Path":"/usr/bin/python3.11","Version":"3.11.2"}`)) {
		t.Errorf("interpreter keys: %s", b)
	}
	var back Materialization
	if err := json.Unmarshal(b, &back); err != nil || back.Interpreter != m.Interpreter || back.Digest != m.Digest || *back.Bytecode != bc || *back.Root != *m.Root {
		t.Errorf("read back %+v (%v)", back, err)
	}
}

// TestLoadNoSuchEnv: Load of a path that is neither an env nor a seal (a
// typo given to env sbom, say) says so, without the rebuild remedy an env
// whose seal was lost gets, and advises listing the envs there are; env
// verify already said so.
func TestLoadNoSuchEnv(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "nonexistent")
	_, err := Load(gone)
	if refusal.CodeOf(err) != refusal.SealMissing || !strings.Contains(err.Error(), "no such directory and no seal") || refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionListEnvs {
		t.Errorf("a path that does not exist: %v (remedy %+v)", err, refusal.RemedyOf(err))
	}
	env := filepath.Join(dir, strings.Repeat("a", 64))
	if err := os.Mkdir(env, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err = Load(env); refusal.CodeOf(err) != refusal.SealMissing || refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionRebuildEnv {
		t.Errorf("an env without its seal: %v (remedy %+v)", err, refusal.RemedyOf(err))
	}
	// A directory no env is named as (env verify ~/.local/share/cruxprov/envs,
	// or /tmp): it advised rebuilding an env, which would not make it one.
	for _, d := range []string{dir, filepath.Join(dir, "envs")} {
		os.MkdirAll(d, 0o755)
		if _, err = Load(d); refusal.CodeOf(err) != refusal.SealMissing || !strings.Contains(err.Error(), "not named by a materialization digest") || refusal.RemedyOf(err) == nil || refusal.RemedyOf(err).Action != refusal.ActionListEnvs {
			t.Errorf("%s, no env's name: %v (remedy %+v)", d, err, refusal.RemedyOf(err))
		}
	}
}

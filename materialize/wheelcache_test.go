package materialize

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cruxible/cruxprov/internal/wheeltest"
	"github.com/cruxible/cruxprov/lockfile"
	"github.com/cruxible/cruxprov/refusal"
	"github.com/cruxible/cruxprov/store"
)

// unpackedEntry is the unpacked-cache path of w in st.
func unpackedEntry(st *store.Store, w lockfile.ResolvedWheel) string {
	return filepath.Join(st.Home(), UnpackedCacheDir, w.SHA256.Hex())
}

// recreate removes res's env and creates req again.
func recreate(t *testing.T, st *store.Store, req Request, res *Result) *Result {
	t.Helper()
	removeEnv(t, res)
	r, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reused {
		t.Fatal("the env was reused, not created")
	}
	return r
}

func removeEnv(t *testing.T, res *Result) {
	t.Helper()
	for _, p := range []string{res.Dir + ".seal.json", res.Dir + ".index", res.Dir} {
		if err := removeTree(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnpackedCacheRoundTrip: the first create writes one read-only entry
// per wheel, the concatenated members but RECORD; the next create reads
// them and makes the same tree.
func TestUnpackedCacheRoundTrip(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	cold, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(unpackedEntry(st, w))
	if err != nil {
		t.Fatalf("no cache entry after the first create: %v", err)
	}
	var want int64
	for _, c := range demoWheel {
		want += int64(len(c))
	}
	// + METADATA and WHEEL, which wheeltest.Build adds: at least the members.
	if fi.Size() < want || fi.Mode().Perm() != 0o444 {
		t.Fatalf("cache entry: %d bytes (members %d), mode %v", fi.Size(), want, fi.Mode())
	}
	warm := recreate(t, st, req, cold)
	if warm.TreeDigest != cold.TreeDigest {
		t.Fatalf("tree from the cache %s, from the archive %s", warm.TreeDigest, cold.TreeDigest)
	}
	if out := runPython(t, warm.Dir, "-c", "import demo; print(demo.VALUE)"); out != "42\n" {
		t.Fatalf("import from the cached install: %q", out)
	}
}

// TestUnpackedCacheDamage: an entry whose bytes differ from RECORD (same
// size) or whose size is wrong is never installed from: the env is the
// same as from the archive, and the bad entry is gone.
func TestUnpackedCacheDamage(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	first, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	entry := unpackedEntry(st, w)
	good, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(good, []byte("VALUE = 42"))
	if i < 0 {
		t.Fatal("member bytes not found in the cache entry")
	}
	for name, bad := range map[string][]byte{
		"flipped byte": append(append(bytes.Clone(good[:i+9]), '3'), good[i+10:]...),
		"truncated":    good[:len(good)-1],
		"extended":     append(bytes.Clone(good), 'x'),
		"empty":        {},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.Chmod(entry, 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := os.WriteFile(entry, bad, 0o444); err != nil {
				t.Fatal(err)
			}
			r := recreate(t, st, req, first)
			if r.TreeDigest != first.TreeDigest {
				t.Fatalf("tree %s, want %s", r.TreeDigest, first.TreeDigest)
			}
			if b, err := os.ReadFile(entry); err == nil && !bytes.Equal(b, good) {
				t.Fatal("the damaged entry is still there")
			}
			first = r
		})
	}
	// The next create writes the entry again.
	recreate(t, st, req, first)
	if b, err := os.ReadFile(entry); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("entry not rewritten: %v", err)
	}
}

// TestUnpackedCacheNotWrittenOnRefusal: a wheel refused while installing
// leaves no cache entry; NoCache writes none either.
func TestUnpackedCacheNotWrittenOnRefusal(t *testing.T) {
	st := newStore(t)
	b := wheeltest.Build(t, "demo-1.0-py3-none-any.whl", demoWheel)
	i := bytes.Index(b, []byte("VALUE = 42"))
	b = bytes.Clone(b)
	b[i+9] = '3'
	w := putWheel(t, st, "demo-1.0-py3-none-any.whl", b)
	if _, err := Create(context.Background(), st, request(t, w)); !errors.Is(err, refusal.RecordMismatch) {
		t.Fatalf("tampered member: %v", err)
	}
	if _, err := os.Stat(unpackedEntry(st, w)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused wheel's cache entry exists: %v", err)
	}

	st2 := newStore(t)
	w2 := putDemo(t, st2)
	req := request(t, w2)
	req.NoCache = true
	if _, err := Create(context.Background(), st2, req); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st2.Home(), UnpackedCacheDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NoCache wrote the cache: %v", err)
	}
}

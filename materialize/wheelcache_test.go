package materialize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cruxible/cruxprov/internal/testdir"
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

// createWarned creates the demo env in a new store, its warnings kept
// in *warnings, and returns the store, the wheel, the request and the
// env.
func createWarned(t *testing.T, warnings *[]string) (*store.Store, lockfile.ResolvedWheel, Request, *Result) {
	t.Helper()
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	req.Warn = func(s string) { *warnings = append(*warnings, s) }
	first, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	return st, w, req, first
}

// TestUnpackedCacheDamage: an entry whose bytes differ from RECORD (same
// size), whose size is wrong, or that is not a regular file is never
// installed from: the env is the same as from the archive, the bad entry
// is gone, and a warning names it and what was wrong (an entry of the
// wrong size, or not a regular file, was replaced silently).
func TestUnpackedCacheDamage(t *testing.T) {
	var warnings []string
	st, w, req, first := createWarned(t, &warnings)
	if len(warnings) != 0 {
		t.Fatalf("warnings of a create with no cache: %q", warnings)
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
	write := func(b []byte) func() error {
		return func() error {
			if err := os.WriteFile(entry, b, 0o444); err != nil {
				return err
			}
			return os.Chmod(entry, 0o444) // whatever the umask: of the mode the cache writes
		}
	}
	sized := fmt.Sprintf(" bytes, the wheel's members are %d", len(good))
	for _, tc := range []struct {
		name, says string
		put        func() error
	}{
		{"flipped byte", "differs from the wheel's RECORD", write(append(append(bytes.Clone(good[:i+9]), '3'), good[i+10:]...))},
		{"truncated", fmt.Sprint(len(good)-1) + sized, write(good[:len(good)-1])},
		{"extended", fmt.Sprint(len(good)+1) + sized, write(append(bytes.Clone(good), 'x'))},
		{"empty", "0" + sized, write([]byte{})},
		{"symlink", "not a regular file but a symbolic link", func() error {
			// To the right bytes: still not what the cache writes.
			target := filepath.Join(t.TempDir(), "good")
			if err := os.WriteFile(target, good, 0o444); err != nil {
				return err
			}
			return os.Symlink(target, entry)
		}},
		{"directory", "not a regular file but a directory", func() error { return os.Mkdir(entry, 0o755) }},
		{"named pipe", "not a regular file but a FIFO (named pipe)", func() error { return unix.Mkfifo(entry, 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Chmod(entry, 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := os.Remove(entry); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := tc.put(); err != nil {
				t.Fatal(err)
			}
			warnings = nil
			r := recreate(t, st, req, first)
			if r.TreeDigest != first.TreeDigest {
				t.Fatalf("tree %s, want %s", r.TreeDigest, first.TreeDigest)
			}
			if fi, err := os.Lstat(entry); err == nil && !fi.Mode().IsRegular() {
				t.Fatalf("the entry is still %v", fi.Mode())
			}
			if b, err := os.ReadFile(entry); err == nil && !bytes.Equal(b, good) {
				t.Fatal("the damaged entry is still there")
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], entry+" is damaged: ") || !strings.Contains(warnings[0], tc.says) {
				t.Fatalf("warnings %q, want one naming %s, saying %q", warnings, entry, tc.says)
			}
			first = r
		})
	}
	// The next create writes the entry again, and warns about nothing.
	warnings = nil
	recreate(t, st, req, first)
	if b, err := os.ReadFile(entry); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("entry not rewritten: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings on a good cache: %q", warnings)
	}
}

// TestUnpackedCacheWrongMode: an entry of the right size made writable
// (mode 0644, where the cache writes 0444) is set back to 0444 with a
// warning naming it and its mode, and read as any entry is (the same
// file, not rewritten: its bytes are checked against RECORD as they are
// read); it was used silently, writable. Writable and with a byte
// flipped, it is warned of for both, and replaced as a damaged entry is.
func TestUnpackedCacheWrongMode(t *testing.T) {
	var warnings []string
	st, w, req, first := createWarned(t, &warnings)
	entry := unpackedEntry(st, w)
	good, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	ino := func() uint64 {
		var s unix.Stat_t
		if err := unix.Stat(entry, &s); err != nil {
			t.Fatal(err)
		}
		if s.Mode&07777 != 0o444 {
			t.Errorf("the entry's mode is %04o, want 0444", s.Mode&07777)
		}
		return s.Ino
	}
	before := ino()
	if err := os.Chmod(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	warnings = nil
	r := recreate(t, st, req, first)
	if r.TreeDigest != first.TreeDigest {
		t.Fatalf("tree %s, want %s", r.TreeDigest, first.TreeDigest)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "cache entry "+entry+" had mode 0644, not the 0444 the cache writes; set it back to 0444") {
		t.Fatalf("warnings %q, want one naming %s and its mode", warnings, entry)
	}
	if ino() != before {
		t.Error("the entry was rewritten, not set back")
	}

	// Writable and damaged: both said, and the entry replaced.
	i := bytes.Index(good, []byte("VALUE = 42"))
	bad := append(append(bytes.Clone(good[:i+9]), '3'), good[i+10:]...)
	if err := os.Chmod(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	warnings = nil
	r = recreate(t, st, req, r)
	if r.TreeDigest != first.TreeDigest {
		t.Fatalf("tree %s, want %s", r.TreeDigest, first.TreeDigest)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], " had mode 0644") || !strings.Contains(warnings[1], entry+" is damaged: ") {
		t.Fatalf("warnings %q, want the mode's, then the damage's", warnings)
	}
	if _, err := os.Lstat(entry); err == nil {
		t.Fatal("the damaged entry is still there")
	}
	// The next create writes it again, read-only, warning about nothing.
	warnings = nil
	recreate(t, st, req, r)
	if b, err := os.ReadFile(entry); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("entry not rewritten: %v", err)
	}
	ino()
	if len(warnings) != 0 {
		t.Errorf("warnings on a good cache: %q", warnings)
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

// TestUnpackedCacheSeveralDamaged: when several entries are damaged, one
// create discards every one of them, warns about each, and succeeds from
// the wheels; it used to discard the first it hit and build without the
// cache, leaving the others for the next creates to find one at a time
// (silently). The create after it writes them again.
func TestUnpackedCacheSeveralDamaged(t *testing.T) {
	st := newStore(t)
	var ws []lockfile.ResolvedWheel
	for _, name := range []string{"alpha", "beta", "gamma"} {
		fn := name + "-1.0-py3-none-any.whl"
		ws = append(ws, putWheel(t, st, fn, wheeltest.Build(t, fn, map[string]string{name + "/__init__.py": "VALUE = 42\n"})))
	}
	req := request(t, ws...)
	first, err := Create(context.Background(), st, req)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string][]byte{}
	for _, w := range ws[:2] { // alpha and beta damaged, gamma intact
		e := unpackedEntry(st, w)
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		good[e] = b
		i := bytes.Index(b, []byte("VALUE = 42"))
		if i < 0 {
			t.Fatal("member bytes not found in the cache entry")
		}
		bad := append(append(bytes.Clone(b[:i+9]), '3'), b[i+10:]...)
		if err := os.Chmod(e, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e, bad, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(e, 0o444); err != nil { // damaged in place, not made writable
			t.Fatal(err)
		}
	}
	var warnings []string
	req.Warn = func(s string) { warnings = append(warnings, s) }
	r := recreate(t, st, req, first)
	if r.TreeDigest != first.TreeDigest {
		t.Fatalf("tree %s, want %s", r.TreeDigest, first.TreeDigest)
	}
	for e := range good {
		if _, err := os.Lstat(e); err == nil {
			t.Errorf("the damaged entry %s is still there", e)
		}
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, e) && strings.Contains(w, "damaged") }) {
			t.Errorf("no warning names %s: %q", e, warnings)
		}
	}
	if len(warnings) != 2 {
		t.Errorf("%d warnings, want 2 (gamma's entry is intact): %q", len(warnings), warnings)
	}
	if _, err := os.Stat(unpackedEntry(st, ws[2])); err != nil {
		t.Errorf("the intact entry is gone: %v", err)
	}
	// The next create writes them again, warning about nothing.
	warnings = nil
	recreate(t, st, req, r)
	for e, b := range good {
		if got, err := os.ReadFile(e); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s not rewritten: %v", e, err)
		}
	}
	if len(warnings) != 0 {
		t.Errorf("warnings on a good cache: %q", warnings)
	}
}

// TestTreeDiscardsDamagedEntries: an image's tree (Tree) meets a damaged
// entry as a create does: removed with a warning, the tree built from the
// wheels. It failed with the bare cacheDamaged error (no refusal code).
func TestTreeDiscardsDamagedEntries(t *testing.T) {
	st := newStore(t)
	w := putDemo(t, st)
	req := request(t, w)
	cold, err := Tree(context.Background(), st, req, filepath.Join(testdir.New(t), "cold"), "/opt/env")
	if err != nil {
		t.Fatal(err)
	}
	entry := unpackedEntry(st, w)
	b, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("VALUE = 42"))
	if i < 0 {
		t.Fatal("member bytes not found in the cache entry")
	}
	if err := os.Chmod(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, append(append(bytes.Clone(b[:i+9]), '3'), b[i+10:]...), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(entry, 0o444); err != nil { // damaged in place, not made writable
		t.Fatal(err)
	}
	var warnings []string
	req.Warn = func(s string) { warnings = append(warnings, s) }
	warm, err := Tree(context.Background(), st, req, filepath.Join(testdir.New(t), "warm"), "/opt/env")
	if err != nil {
		t.Fatalf("tree over a damaged cache entry: %v", err)
	}
	if warm.TreeDigest != cold.TreeDigest || len(warnings) != 1 || !strings.Contains(warnings[0], entry) {
		t.Fatalf("tree %s (want %s), warnings %q", warm.TreeDigest, cold.TreeDigest, warnings)
	}
	if _, err := os.Lstat(entry); err == nil {
		t.Error("the damaged entry is still there")
	}
}

package materialize

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// writePack writes a pack of entries (source → kind and pyc) for key to
// dir/name through packWriter and returns its bytes.
func writePack(t testing.TB, dir, name string, key [32]byte, entries map[[32]byte]packTestEntry) []byte {
	t.Helper()
	w, err := newPackWriter(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	for src, e := range entries {
		w.add(src, e.kind, e.pyc)
	}
	p := filepath.Join(dir, name)
	if err := w.commit(p, key); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type packTestEntry struct {
	kind byte
	pyc  []byte
}

// A pack written by packWriter reads back entry for entry; the first
// entry added for a source wins; a pack damaged anywhere in its index,
// header or trailer reads as absent, and a pyc damaged in place fails its
// own checksum only.
func TestPycPack(t *testing.T) {
	dir := t.TempDir()
	key := [32]byte{1}
	pyc := seedPyc("\xa7\r\r\n", 0xfa)
	entries := map[[32]byte]packTestEntry{
		{2}: {pycKindPyc, pyc},
		{3}: {pycKindNoSource, nil},
		{4}: {pycKindDirect, nil},
		{5}: {pycKindPyc, append(bytes.Clone(pyc), "more"...)},
	}
	b := writePack(t, dir, "demo/demo-1.0-py3-none-any.whl.pycs", key, entries)
	p, err := openPycPack(filepath.Join(dir, "demo/demo-1.0-py3-none-any.whl.pycs"), key)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if len(p.index) != len(entries) {
		t.Fatalf("%d entries, want %d", len(p.index), len(entries))
	}
	var buf []byte
	for src, want := range entries {
		e, ok := p.index[src]
		if !ok || e.kind != want.kind {
			t.Fatalf("%x: %v %c, want %c", src[:1], ok, e.kind, want.kind)
		}
		got, err := p.read(e, &buf)
		if err != nil || !bytes.Equal(got, want.pyc) {
			t.Errorf("%x: %v, or other bytes", src[:1], err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "demo/demo-1.0-py3-none-any.whl.pycs")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("mode %v (%v), want 0444", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "pycs-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	w, err := newPackWriter(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	w.add([32]byte{2}, pycKindPyc, pyc)
	w.add([32]byte{2}, pycKindNoSource, nil)
	if !w.has([32]byte{2}) || w.has([32]byte{3}) {
		t.Error("has")
	}
	w.discard()

	// The pycs start right after the header: flipping a byte of the first
	// fails that entry alone.
	flippedPyc := bytes.Clone(b)
	flippedPyc[pycPackHeadLen] ^= 1
	ix, err := readPackIndex(bytes.NewReader(flippedPyc), int64(len(flippedPyc)), key)
	if err != nil {
		t.Fatalf("a damaged pyc fails the index: %v", err)
	}
	damaged := 0
	for _, e := range ix {
		if e.n == 0 {
			continue
		}
		got := flippedPyc[e.off : e.off+int64(e.n)]
		if crc32.Checksum(got, castagnoli) != e.crc {
			damaged++
		}
	}
	if damaged != 1 {
		t.Errorf("%d entries fail their checksum, want 1", damaged)
	}

	n := binary.LittleEndian.Uint32(b[len(b)-pycPackTailLen:])
	idx := len(b) - pycPackTailLen - int(n)*pycPackRecLen
	flip := func(at int) []byte {
		c := bytes.Clone(b)
		c[at] ^= 1
		return c
	}
	for name, c := range map[string]struct {
		b   []byte
		key [32]byte
	}{
		"truncated":   {b[:len(b)-1], key},
		"empty":       {nil, key},
		"magic":       {flip(0), key},
		"key":         {flip(len(pycPackMagic)), key},
		"other key":   {b, [32]byte{9}},
		"index":       {flip(idx + 40), key},
		"count":       {flip(len(b) - pycPackTailLen), key},
		"checksum":    {flip(len(b) - 1), key},
		"index only":  {b[idx:], key},
		"header only": {b[:pycPackHeadLen], key},
		"garbage":     {bytes.Repeat([]byte{0xff}, 200), key},
	} {
		if _, err := readPackIndex(bytes.NewReader(c.b), int64(len(c.b)), c.key); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzReadPackIndex: never panics, and every entry it accepts lies within
// the pack's pycs with a length its kind allows.
func FuzzReadPackIndex(f *testing.F) {
	key := [32]byte{1}
	dir := f.TempDir()
	f.Add(writePack(f, dir, "a.pycs", key, map[[32]byte]packTestEntry{{2}: {pycKindPyc, seedPyc("\xa7\r\r\n", 0xfa)}, {3}: {pycKindNoSource, nil}}))
	f.Add(writePack(f, dir, "b.pycs", key, nil))
	f.Add([]byte(pycPackMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := readPackIndex(bytes.NewReader(b), int64(len(b)), key)
		if err != nil {
			return
		}
		end := int64(len(b) - pycPackTailLen - len(ix)*pycPackRecLen)
		for _, e := range ix {
			if e.off < int64(pycPackHeadLen) || e.off+int64(e.n) > end {
				t.Fatalf("entry %+v outside [%d, %d)", e, pycPackHeadLen, end)
			}
			if (e.kind == pycKindPyc) != (e.n > 0) {
				t.Fatalf("entry of kind %c with %d bytes", e.kind, e.n)
			}
		}
	})
}

// TestPycPackModeUmask077: a pack is 0444 under an operator's umask 077,
// as docs/store.md says and as the unpacked-wheel cache's entries are (it
// was 0400: the mode given to open, masked). Not parallel: the umask is
// the process's.
func TestPycPackModeUmask077(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	key := [32]byte{1}
	writePack(t, dir, "demo/demo-1.0-py3-none-any.whl.pycs", key, map[[32]byte]packTestEntry{{2}: {pycKindNoSource, nil}})
	if fi, err := os.Stat(filepath.Join(dir, "demo/demo-1.0-py3-none-any.whl.pycs")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("under umask 077: mode %v (%v), want 0444", fi.Mode(), err)
	}
}

package elfread

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// seeds are the real ELF files of testdata (README.md says how they were
// built), with the host's own loader-named interpreter where there is one.
func seeds(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, n := range []string{"runpath-exe", "rpath.so"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

func TestRead(t *testing.T) {
	s := seeds(t)
	exe, err := Read(bytes.NewReader(s["runpath-exe"]), Options{Runpaths: true})
	if err != nil || exe.Type != elf.ET_DYN || exe.Machine != elf.EM_X86_64 || !exe.Dynamic ||
		exe.Interp != "/lib64/ld-linux-x86-64.so.2" || !slices.Equal(exe.Runpaths, []string{"$ORIGIN/../lib:/opt/x"}) {
		t.Errorf("runpath-exe: %+v %v", exe, err)
	}
	so, err := Read(bytes.NewReader(s["rpath.so"]), Options{Runpaths: true})
	if err != nil || so.Dynamic || so.Interp != "" || !slices.Equal(so.Runpaths, []string{"/opt/y"}) {
		t.Errorf("rpath.so: %+v %v", so, err)
	}
	if _, err := Read(bytes.NewReader([]byte("#!/bin/sh\n")), Options{}); err == nil {
		t.Error("a script read as ELF")
	}
}

// TestReadHugeInterp: a PT_INTERP whose header claims 4 EiB is a dynamic
// file naming no loader, not an allocation of it (platform's musl
// probe made one: a panic or the OOM killer).
func TestReadHugeInterp(t *testing.T) {
	b := bytes.Clone(seeds(t)["runpath-exe"])
	phoff := binary.LittleEndian.Uint64(b[32:])
	phentsize := uint64(binary.LittleEndian.Uint16(b[54:]))
	phnum := uint64(binary.LittleEndian.Uint16(b[56:]))
	found := false
	for i := uint64(0); i < phnum; i++ {
		ph := b[phoff+i*phentsize:]
		if elf.ProgType(binary.LittleEndian.Uint32(ph)) == elf.PT_INTERP {
			binary.LittleEndian.PutUint64(ph[32:], 1<<62) // p_filesz
			found = true
		}
	}
	if !found {
		t.Fatal("no PT_INTERP in the seed")
	}
	info, err := Read(bytes.NewReader(b), Options{})
	if err != nil || !info.Dynamic || info.Interp != "" {
		t.Errorf("%+v %v", info, err)
	}
}

// FuzzRead: whatever bytes a host interpreter, an extension module or a
// --shim holds, Read returns (an Info or an error) without panicking or
// allocating what a header claims; a loader's name is at most MaxInterp
// bytes and only a dynamic file names one.
func FuzzRead(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b)
	}
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Read(bytes.NewReader(b), Options{Runpaths: true})
		if err != nil {
			if info.Dynamic || info.Interp != "" || info.Runpaths != nil {
				t.Fatalf("error %v with %+v", err, info)
			}
			return
		}
		if len(info.Interp) > MaxInterp || (!info.Dynamic && info.Interp != "") {
			t.Fatalf("%+v", info)
		}
	})
}

package platform

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestMuslVersionHugeInterp: an interpreter whose PT_INTERP header claims
// 4 EiB is no musl (its loader unnamed), not a make() of that size (it
// panicked: makeslice: len out of range).
func TestMuslVersionHugeInterp(t *testing.T) {
	b, err := os.ReadFile("../internal/elfread/testdata/runpath-exe")
	if err != nil {
		t.Fatal(err)
	}
	phoff := binary.LittleEndian.Uint64(b[32:])
	phentsize := uint64(binary.LittleEndian.Uint16(b[54:]))
	for i := uint64(0); i < uint64(binary.LittleEndian.Uint16(b[56:])); i++ {
		if ph := b[phoff+i*phentsize:]; elf.ProgType(binary.LittleEndian.Uint32(ph)) == elf.PT_INTERP {
			binary.LittleEndian.PutUint64(ph[32:], 1<<62)
		}
	}
	exe := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if mj, mn, ok := muslVersion(context.Background(), exe); ok {
		t.Errorf("musl %d.%d", mj, mn)
	}
}

package materialize

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

// FuzzReadAnswers: whatever the compile script's process writes back
// (its interpreter is the operator's, and may be anything), readAnswers
// takes n well-framed answers or refuses, without panicking; the answers
// it takes are the frames it was given, byte for byte; and it allocates
// in proportion to what it was sent, not to what a header claims.
func FuzzReadAnswers(f *testing.F) {
	frame := func(kind byte, pyc []byte) []byte {
		h := []byte{kind, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(h[1:], uint32(len(pyc)))
		return append(h, pyc...)
	}
	f.Add(uint8(2), append(frame('P', []byte("pyc-bytes")), frame('N', nil)...))
	f.Add(uint8(1), frame('X', nil))
	f.Add(uint8(1), frame('D', bytes.Repeat([]byte{1}, 300<<10)))
	f.Add(uint8(1), []byte{'P', 0xff, 0xff, 0xff, 0x7f})
	f.Add(uint8(3), []byte{'N', 0, 0, 0})
	f.Fuzz(func(t *testing.T, n uint8, b []byte) {
		var buf []byte
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := readAnswers(bufio.NewReader(bytes.NewReader(b)), int(n%8), &buf)
		runtime.ReadMemStats(&after)
		// What it allocates is bounded by what it was sent (twice, as
		// the buffer doubles), plus a chunk: a frame that claims 256 MiB
		// and sends nothing made a 256 MiB buffer.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(4*len(b)+4<<20) {
			t.Fatalf("%d bytes allocated for %d bytes of answers", grew, len(b))
		}
		if err != nil {
			return
		}
		if len(res) != int(n%8) {
			t.Fatalf("%d answers for %d", len(res), n%8)
		}
		off := 0
		for _, c := range res {
			if off+5 > len(b) || b[off] != c.kind || int(binary.LittleEndian.Uint32(b[off+1:])) != len(c.pyc) || !bytes.Equal(b[off+5:off+5+len(c.pyc)], c.pyc) {
				t.Fatalf("answer %q is not the frame at %d", c.kind, off)
			}
			off += 5 + len(c.pyc)
		}
	})
}

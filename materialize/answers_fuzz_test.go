package materialize

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzReadAnswers: whatever the compile script's process writes back
// (its interpreter is the operator's, and may be anything), readAnswers
// takes n well-framed answers or refuses, without panicking; the answers
// it takes are the frames it was given, byte for byte.
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
		if len(b) >= 5 && binary.LittleEndian.Uint32(b[1:5]) > uint32(len(b)) && binary.LittleEndian.Uint32(b[1:5]) > 1<<20 {
			// A frame claiming more than the input holds: readAnswers
			// sizes its buffer by the claim (up to maxPycEntry) before
			// reading; keep the fuzzer off that cost.
			return
		}
		var buf []byte
		res, err := readAnswers(bufio.NewReader(bytes.NewReader(b)), int(n%8), &buf)
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

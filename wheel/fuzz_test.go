package wheel

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/refusal"
)

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		rec("a/b.py", []byte("x")) + "a-1.0.dist-info/RECORD,,\n",
		"\"a,b\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\r\n",
		"a,,\n", "a,sha256=,1\n", "a,md5=x,1\n", "a,b\n", "\"unterminated", "a,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=,-1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := parseRecord(b)
		if err != nil {
			if refusal.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// What parses renders back to the same lines.
		again, err := parseRecord(formatRecord(lines))
		if err != nil || !reflect.DeepEqual(again, lines) && len(lines) > 0 {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, lines, again)
		}
	})
}

func FuzzOpenWheel(f *testing.F) {
	good := writeWheel(f, demoName, demoEntries())
	f.Add(good)
	ms := demoRaw()
	ms = append(ms, recordFor(ms, "demo_pkg-1.0.dist-info"))
	f.Add(rawZip(f, ms))
	ms[0].data = []byte("VALUE = 43\n")
	f.Add(rawZip(f, ms))
	f.Add(good[:len(good)/2])
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := openBytes(b, demoName)
		if err != nil {
			if refusal.CodeOf(err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := w.EntryPoints(); err != nil && refusal.CodeOf(err) == "" {
			t.Fatalf("entry points: untyped error %v", err)
		}
		if err := w.Verify(context.Background()); err != nil {
			if refusal.CodeOf(err) == "" {
				t.Fatalf("verify: untyped error %v", err)
			}
			return
		}
		// A verified wheel rewrites into one that opens and verifies.
		var out bytes.Buffer
		if err := Rewrite(context.Background(), &out, w, nil); err != nil {
			if refusal.CodeOf(err) == "" {
				t.Fatalf("rewrite: untyped error %v", err)
			}
			return
		}
		r, err := openBytes(out.Bytes(), demoName)
		if err != nil {
			t.Fatalf("rewritten wheel does not open: %v", err)
		}
		if err := r.Verify(context.Background()); err != nil {
			t.Fatalf("rewritten wheel does not verify: %v", err)
		}
	})
}

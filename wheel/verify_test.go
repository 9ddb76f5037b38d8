package wheel

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/digest"
	"github.com/cruxible/cruxprov/refusal"
)

// TestOneRuleForMembers: the wheel's own reading (Extract, Verify) and the
// readers an installer opens (OpenMember on another zip.Reader of the
// archive, NewMemberReader on a copy of the bytes) are one implementation
// with one rule. A member without a RECORD hash is refused by all of them
// (record_missing); before, Extract skipped the hash check of a member
// whose hash was empty while the installer's copy refused it. RECORD and
// its signature files, which the spec exempts, are read by size alone,
// and other bytes are record_mismatch everywhere.
func TestOneRuleForMembers(t *testing.T) {
	raw := demoRaw()
	di := "demo_pkg-1.0.dist-info"
	raw = append(raw, rawMember{name: di + "/RECORD.jws", data: []byte("{}"), noRecord: true})
	raw = append(raw, recordFor(raw, di))
	b := rawZip(t, raw)
	const member = "demo_pkg/__init__.py"
	cases := []struct {
		name  string
		edit  func(f *File)            // applied to member's File
		bytes func(data []byte) []byte // what the copy readers read instead
		code  refusal.Code
	}{
		{"verified", func(*File) {}, nil, ""},
		{"empty hash", func(f *File) { f.SHA256 = digest.Digest{} }, nil, refusal.RecordMissing},
		{"other bytes", nil, func(d []byte) []byte { d[0] ^= 1; return d }, refusal.RecordMismatch},
		{"short", nil, func(d []byte) []byte { return d[:len(d)-1] }, refusal.RecordMismatch},
		{"long", nil, func(d []byte) []byte { return append(d, '\n') }, refusal.RecordMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := openBytes(b, demoName)
			if err != nil {
				t.Fatal(err)
			}
			i := w.byName[member]
			if c.edit != nil {
				c.edit(&w.files[i])
				// The wheel's own path.
				err := w.Extract(context.Background(), func(File, io.Reader) error { return nil })
				checkCode(t, "Extract", err, c.code)
				// The installer's path: another zip.Reader of the archive.
				zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
				if err != nil {
					t.Fatal(err)
				}
				for _, zf := range zr.File {
					if zf.Name == member {
						m, err := OpenMember(zf, w.files[i])
						if err == nil {
							_, err = io.Copy(io.Discard, m)
							m.Close()
						}
						checkCode(t, "OpenMember", err, c.code)
					}
				}
			}
			data := []byte("VALUE = 42\n") // the member's bytes
			if c.bytes != nil {
				data = c.bytes(append([]byte{}, data...))
			}
			_, err = io.Copy(io.Discard, NewMemberReader(bytes.NewReader(data), w.files[i]))
			checkCode(t, "NewMemberReader", err, c.code)
		})
	}

	// The exempt files: no hash, checked by size.
	w, err := openBytes(b, demoName)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{di + "/RECORD", di + "/RECORD.jws"} {
		f := w.files[w.byName[name]]
		if !f.SHA256.IsZero() {
			t.Fatalf("%s has a hash", name)
		}
		data, err := w.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := io.Copy(io.Discard, NewMemberReader(bytes.NewReader(data), f)); err != nil {
			t.Errorf("%s read by size: %v", name, err)
		}
		_, err = io.Copy(io.Discard, NewMemberReader(bytes.NewReader(append(data, 'x')), f))
		checkCode(t, name+" longer", err, refusal.RecordMismatch)
		// The same name in a File not from Open has no exemption.
		_, err = io.Copy(io.Discard, NewMemberReader(bytes.NewReader(data), File{Name: f.Name, Size: f.Size}))
		checkCode(t, name+" made elsewhere", err, refusal.RecordMissing)
	}
}

func checkCode(t *testing.T, how string, err error, code refusal.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Errorf("%s: %v", how, err)
		}
		return
	}
	var r *refusal.Error
	if !errors.As(err, &r) || r.Code != code || refusal.CodeOf(err) != code {
		t.Errorf("%s: got %v, want %s", how, err, code)
		return
	}
	for _, other := range []refusal.Code{refusal.SizeMismatch, refusal.HashMismatch, refusal.HashMissing} {
		if errors.Is(err, other) {
			t.Errorf("%s: %v also reads as %s", how, err, other)
		}
	}
	if strings.Contains(err.Error(), "%!") {
		t.Errorf("%s: bad format: %v", how, err)
	}
}

// TestRecordFaultNamesTheWheel: a member that is not what RECORD says is
// refused naming the wheel, saying the mismatch once and what to do. A
// provider author who edited a file of a built wheel was told
// `"demo_pkg/__init__.py" has sha256 X, RECORD says Y; treat the wheel as
// tampered: got sha256:X, want sha256:Y`: no wheel (an env installs
// dozens), the hashes twice, and no next step.
func TestRecordFaultNamesTheWheel(t *testing.T) {
	di := "demo_pkg-1.0.dist-info"
	cases := []struct {
		name   string
		edit   func(ms []rawMember)
		code   refusal.Code
		verify bool // refused by Verify, not by OpenReader
	}{
		{"same size, other bytes", func(ms []rawMember) { ms[0].data = []byte("VALUE = 43\n") }, refusal.RecordMismatch, true},
		{"other size", func(ms []rawMember) { ms[0].data = []byte("VALUE = 4300\n") }, refusal.RecordMismatch, false},
		{"not in RECORD", func(ms []rawMember) {}, refusal.RecordMissing, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := demoRaw()
			ms = append(ms, recordFor(ms, di))
			c.edit(ms)
			if c.code == refusal.RecordMissing {
				ms = append(ms, rawMember{name: "demo_pkg/extra.py", data: []byte("x = 1\n")})
			}
			w, err := openBytes(rawZip(t, ms), demoName)
			if c.verify {
				if err != nil {
					t.Fatal(err)
				}
				err = w.Verify(context.Background())
			}
			var r *refusal.Error
			if !errors.As(err, &r) || r.Code != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			msg := r.Message()
			if !strings.HasPrefix(msg, demoName+": ") || strings.Count(msg, demoName) != 1 {
				t.Errorf("%q does not name the wheel first, once", msg)
			}
			if c.code == refusal.RecordMismatch && (strings.Contains(msg, "tampered: got") || !strings.Contains(msg, "rebuild it from its source")) {
				t.Errorf("%q: want the mismatch once and what to do", msg)
			}
		})
	}
	// Named leaves alone what is not a refusal of the wheel's own.
	other := refusal.New(refusal.FetchFailed, "not the wheel's")
	if Named(demoName, other) != error(other) {
		t.Error("Named renamed another code's refusal")
	}
}

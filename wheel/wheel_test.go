package wheel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/platform"
	"github.com/cruxible/cruxprov/refusal"
)

func TestWriteOpenRoundTrip(t *testing.T) {
	b := writeWheel(t, demoName, demoEntries())
	w, err := openBytes(b, demoName)
	if err != nil {
		t.Fatal(err)
	}
	if w.DistInfo() != "demo_pkg-1.0.dist-info" || w.DataDir() != "demo_pkg-1.0.data" {
		t.Errorf("dist-info %q data %q", w.DistInfo(), w.DataDir())
	}
	m := w.Metadata()
	if m.Name != "demo-pkg" || m.Version != "1.0" || m.RequiresPython != ">=3.8" ||
		!reflect.DeepEqual(m.RequiresDist, []string{"requests>=2", `idna; extra == "x"`}) {
		t.Errorf("metadata %+v", m)
	}
	wi := w.WheelInfo()
	if wi.WheelVersion != "1.0" || !wi.RootIsPurelib || !reflect.DeepEqual(wi.Tags, []platform.Tag{{Interpreter: "py3", ABI: "none", Platform: "any"}}) {
		t.Errorf("WHEEL %+v", wi)
	}
	eps, err := w.EntryPoints()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]EntryPoint{
		"console_scripts": {{Name: "demo", Module: "demo_pkg.cli", Attr: "main"}},
		"gui_scripts":     {{Name: "demo-gui", Module: "demo_pkg.cli", Attr: "main", Extras: []string{"gui"}}},
	}
	if !reflect.DeepEqual(eps, want) {
		t.Errorf("entry points %+v", eps)
	}

	// Members: sorted, dist-info last, RECORD the very last, modes kept.
	var names []string
	for _, f := range w.Files() {
		names = append(names, f.Name)
		if f.Name == "demo_pkg-1.0.data/scripts/demo-raw" && f.Mode != 0o755 {
			t.Errorf("script mode %v", f.Mode)
		}
		if f.Name == "demo_pkg/cli.py" && f.Mode != 0o644 {
			t.Errorf("module mode %v", f.Mode)
		}
		if (f.Name == w.DistInfo()+"/RECORD") != f.SHA256.IsZero() {
			t.Errorf("%s hash %v", f.Name, f.SHA256)
		}
	}
	wantNames := []string{
		"demo_pkg-1.0.data/data/share/demo/readme.txt", "demo_pkg-1.0.data/headers/demo.h", "demo_pkg-1.0.data/scripts/demo-raw",
		"demo_pkg/__init__.py", "demo_pkg/cli.py",
		"demo_pkg-1.0.dist-info/METADATA", "demo_pkg-1.0.dist-info/WHEEL", "demo_pkg-1.0.dist-info/entry_points.txt",
		"demo_pkg-1.0.dist-info/top_level.txt", "demo_pkg-1.0.dist-info/RECORD",
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("members\n%q\nwant\n%q", names, wantNames)
	}
	if err := w.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := w.ReadFile("demo_pkg/__init__.py")
	if err != nil || string(got) != "VALUE = 42\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := w.ReadFile(w.DistInfo() + "/cruxible/provider.toml"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	dir := t.TempDir()
	if err := extractTo(w, dir); err != nil {
		t.Fatal(err)
	}
	for _, e := range demoEntries() {
		b, err := os.ReadFile(filepath.Join(dir, e.Name))
		if err != nil || !bytes.Equal(b, e.Data) {
			t.Errorf("%s: %q, %v", e.Name, b, err)
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	a := writeWheel(t, demoName, demoEntries())
	es := demoEntries()
	slices.Reverse(es)
	b := writeWheel(t, demoName, es)
	if !bytes.Equal(a, b) {
		t.Fatal("same entries in another order gave other bytes")
	}
	// Every member stored, at 1980-01-01.
	w, _ := openBytes(a, demoName)
	for _, zf := range w.zr.File {
		if zf.Method != 0 || zf.ModifiedDate != fixedDate || zf.ModifiedTime != 0 || len(zf.Extra) != 0 {
			t.Errorf("%s: method %d date %d time %d extra %d", zf.Name, zf.Method, zf.ModifiedDate, zf.ModifiedTime, len(zf.Extra))
		}
	}
}

func TestWriteRefusesBadEntries(t *testing.T) {
	di := "demo_pkg-1.0.dist-info/"
	for name, tc := range map[string]struct {
		mut  func([]Entry) []Entry
		code refusal.Code
	}{
		"traversal": {func(es []Entry) []Entry { return append(es, Entry{Name: "../x.py"}) }, refusal.WheelUnsafePath},
		"duplicate": {func(es []Entry) []Entry { return append(es, es[0]) }, refusal.WheelInvalid},
		"record":    {func(es []Entry) []Entry { return append(es, Entry{Name: di + "RECORD"}) }, refusal.WheelInvalid},
		"no WHEEL": {func(es []Entry) []Entry {
			return slices.DeleteFunc(es, func(e Entry) bool { return e.Name == di+"WHEEL" })
		}, refusal.WheelInvalid},
		"directory": {func(es []Entry) []Entry { return append(es, Entry{Name: "demo_pkg/sub/"}) }, refusal.WheelInvalid},
		"bad name":  {func(es []Entry) []Entry { return es }, refusal.WheelInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			fn := demoName
			if name == "bad name" {
				fn = "demo pkg.whl"
			}
			var buf bytes.Buffer
			err := Write(&buf, fn, tc.mut(demoEntries()))
			if !errors.Is(err, tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
			if buf.Len() != 0 {
				t.Fatalf("wrote %d bytes despite the refusal", buf.Len())
			}
		})
	}
}

func TestOpenAcceptsNormalizedDistInfo(t *testing.T) {
	// Flask-3.1.3-...whl holding flask-3.1.3.dist-info is a real pattern.
	di := "flask-3.1.3.dist-info"
	ms := []rawMember{
		{name: "flask/__init__.py", data: []byte("")},
		{name: "flask/", data: nil},
		{name: di + "/WHEEL", data: []byte("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")},
		{name: di + "/METADATA", data: []byte("Name: Flask\nVersion: 3.1.3\n")},
		{name: di + "/RECORD.jws", data: []byte("{}"), noRecord: true},
	}
	ms = append(ms, recordFor(ms, di))
	b := rawZip(t, ms)
	w, err := openBytes(b, "Flask-3.1.3-py3-none-any.whl")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.Files()) != 5 { // the directory entry is left out
		t.Errorf("files %+v", w.Files())
	}
	if _, err := openBytes(b, "Flask-3.1.3.0-py3-none-any.whl"); err != nil {
		t.Errorf("3.1.3.0 equals 3.1.3 under PEP 440: %v", err)
	}
}

// TestOpenAcceptsDirectoryRows: a RECORD that lists a directory ("pkg/,,"),
// as some build tools write it, opens and verifies, as pip installs it; it
// was record_missing "RECORD lists "pkg/", which the wheel lacks" though the
// archive held the directory. A row for a directory the archive lacks, or
// one with a hash or a size, is still refused.
func TestOpenAcceptsDirectoryRows(t *testing.T) {
	const di = "demo_pkg-1.0.dist-info"
	for _, c := range []struct {
		name  string
		extra []rawMember
		row   string
		code  refusal.Code
	}{
		{"directory entry", []rawMember{{name: "demo_pkg/"}}, "demo_pkg/,,\n", ""},
		{"implied directory", nil, "demo_pkg/,,\n", ""},
		{"dist-info directory", nil, di + "/,,\n", ""},
		{"absent directory", nil, "ghost/,,\n", refusal.RecordMissing},
		{"directory with a size", []rawMember{{name: "demo_pkg/"}}, "demo_pkg/,,0\n", refusal.RecordMissing},
		{"directory with a hash", []rawMember{{name: "demo_pkg/"}}, rec("demo_pkg/", nil), refusal.RecordMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := append(demoRaw(), c.extra...)
			ms = append(ms, recordFor(ms, di, c.row))
			w, err := openBytes(rawZip(t, ms), demoName)
			if err == nil {
				err = w.Verify(context.Background())
			}
			if got := refusal.CodeOf(err); got != c.code {
				t.Fatalf("got %v, want %q", err, c.code)
			}
		})
	}
}

// TestHostileCorpus builds broken and malicious wheels with archive/zip
// directly and checks each is refused with its code, and that extracting
// what opens writes nothing outside the target nor any unverified file.
func TestHostileCorpus(t *testing.T) {
	const di = "demo_pkg-1.0.dist-info"
	good := func() []rawMember { return demoRaw() }
	withRecord := func(ms []rawMember, extra ...string) []rawMember {
		return append(ms, recordFor(ms, di, extra...))
	}
	zeros := make([]byte, 4<<20)
	cases := []struct {
		name  string
		bytes func(t *testing.T) []byte
		file  string // wheel file name; demoName when ""
		code  refusal.Code
	}{
		{"path traversal", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "../evil.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"nested traversal", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/../../evil.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"absolute path", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "/tmp/evil.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"backslash", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: `demo_pkg\..\..\evil.py`, data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"drive letter", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "C:/evil.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"NUL in name", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/a\x00.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"empty segment", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg//a.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"invalid UTF-8 name", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/\xff\xfe.py", data: []byte("x")})))
		}, "", refusal.WheelUnsafePath},
		{"symlink member", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/link", data: []byte("../../../etc/passwd"), mode: fs.ModeSymlink | 0o777})))
		}, "", refusal.WheelUnsafePath},
		{"symlink bits with a FAT creator", func(t *testing.T) []byte {
			ms := withRecord(append(good(), rawMember{name: "demo_pkg/link", data: []byte("/etc/passwd"), attrs: 0o120777 << 16}))
			b := rawZip(t, ms)
			return b
		}, "", refusal.WheelUnsafePath},
		{"fifo member", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/fifo", data: nil, mode: fs.ModeNamedPipe | 0o644})))
		}, "", refusal.WheelUnsafePath},
		{"RECORD missing", func(t *testing.T) []byte {
			return rawZip(t, good())
		}, "", refusal.RecordMissing},
		{"RECORD hash mismatch", func(t *testing.T) []byte {
			ms := withRecord(good())
			ms[0].data = []byte("VALUE = 43\n") // same size, other bytes
			return rawZip(t, ms)
		}, "", refusal.RecordMismatch},
		{"RECORD size mismatch", func(t *testing.T) []byte {
			ms := withRecord(good())
			ms[0].data = []byte("VALUE = 4242\n")
			return rawZip(t, ms)
		}, "", refusal.RecordMismatch},
		{"RECORD extra line", func(t *testing.T) []byte {
			return rawZip(t, withRecord(good(), rec("demo_pkg/ghost.py", []byte("boo"))))
		}, "", refusal.RecordMissing},
		{"member not in RECORD", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/sneaky.py", data: []byte("import os"), noRecord: true})))
		}, "", refusal.RecordMissing},
		{"RECORD line without hash", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/nohash.py", data: []byte("x"), noRecord: true}), "demo_pkg/nohash.py,,1\n"))
		}, "", refusal.RecordMissing},
		{"RECORD hashes itself", func(t *testing.T) []byte {
			ms := good()
			ms = append(ms, rawMember{name: di + "/RECORD", data: []byte(func() string {
				var b strings.Builder
				for _, m := range ms {
					b.WriteString(rec(m.name, m.data))
				}
				b.WriteString(rec(di+"/RECORD", []byte("whatever")))
				return b.String()
			}())})
			return rawZip(t, ms)
		}, "", refusal.RecordMismatch},
		{"RECORD malformed", func(t *testing.T) []byte {
			return rawZip(t, append(good(), rawMember{name: di + "/RECORD", data: []byte("a,b\n\"unterminated")}))
		}, "", refusal.WheelInvalid},
		{"RECORD md5", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/md5.py", data: []byte("x"), noRecord: true}), "demo_pkg/md5.py,md5=AAAAAAAAAAAAAAAAAAAAAA,1\n"))
		}, "", refusal.WheelInvalid},
		{"two dist-info folders", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "other-1.0.dist-info/METADATA", data: []byte("Name: other\nVersion: 1.0\n")})))
		}, "", refusal.WheelInvalid},
		{"dist-info not matching the file name", func(t *testing.T) []byte {
			return rawZip(t, withRecord(good()))
		}, "demo_pkg-2.0-py3-none-any.whl", refusal.WheelInvalid},
		{"dist-info of another distribution", func(t *testing.T) []byte {
			return rawZip(t, withRecord(good()))
		}, "other-1.0-py3-none-any.whl", refusal.WheelInvalid},
		{"METADATA names another version", func(t *testing.T) []byte {
			ms := good()
			for i := range ms {
				if strings.HasSuffix(ms[i].name, "/METADATA") {
					ms[i].data = []byte("Name: demo-pkg\nVersion: 1.1\n")
				}
			}
			return rawZip(t, withRecord(ms))
		}, "", refusal.WheelInvalid},
		{"WHEEL version 2", func(t *testing.T) []byte {
			ms := good()
			for i := range ms {
				if strings.HasSuffix(ms[i].name, "/WHEEL") {
					ms[i].data = []byte("Wheel-Version: 2.0\nRoot-Is-Purelib: true\n")
				}
			}
			return rawZip(t, withRecord(ms))
		}, "", refusal.WheelInvalid},
		{"no dist-info", func(t *testing.T) []byte {
			return rawZip(t, []rawMember{{name: "demo_pkg/__init__.py", data: []byte("x")}})
		}, "", refusal.WheelInvalid},
		{"data dir outside a scheme", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg-1.0.data/evil/x", data: []byte("x")})))
		}, "", refusal.WheelInvalid},
		{"file and directory at one path", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/cli.py/x", data: []byte("x")})))
		}, "", refusal.WheelInvalid},
		{"decompression bomb: size lies", func(t *testing.T) []byte {
			// Headers and RECORD say 100 bytes; the stream inflates to 4 MiB.
			ms := append(good(), rawMember{name: "demo_pkg/bomb.bin", data: zeros, lieSize: 100, noRecord: true})
			return rawZip(t, withRecord(ms, rec("demo_pkg/bomb.bin", zeros[:100])))
		}, "", refusal.RecordMismatch},
		{"decompression bomb: ratio", func(t *testing.T) []byte {
			return rawZip(t, withRecord(append(good(), rawMember{name: "demo_pkg/bomb.bin", data: zeros, deflate: true})))
		}, "", refusal.WheelInvalid},
		{"duplicate members", func(t *testing.T) []byte {
			ms := good()
			ms = append(ms, rawMember{name: ms[0].name, data: []byte("import os; os.system('x')\n"), noRecord: true})
			return rawZip(t, withRecord(ms))
		}, "", refusal.WheelInvalid},
		{"not a zip", func(t *testing.T) []byte {
			return []byte("this is not a zip archive at all, just text pretending to be a wheel")
		}, "", refusal.WheelInvalid},
		{"truncated zip", func(t *testing.T) []byte {
			b := rawZip(t, withRecord(good()))
			return b[:len(b)*2/3]
		}, "", refusal.WheelInvalid},
		{"empty file", func(t *testing.T) []byte { return nil }, "", refusal.WheelInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.file
			if name == "" {
				name = demoName
			}
			b := tc.bytes(t)
			root := t.TempDir()
			target := filepath.Join(root, "target")
			w, err := openBytes(b, name)
			if err == nil {
				err = extractTo(w, target)
			}
			if !errors.Is(err, tc.code) {
				t.Fatalf("got %v (code %q), want %s", err, refusal.CodeOf(err), tc.code)
			}
			for _, p := range listTree(t, root) {
				if p != "target" && !strings.HasPrefix(p, "target/") {
					t.Errorf("wrote %s outside the target", p)
				}
				if strings.Contains(p, ".part-") || strings.HasSuffix(p, "bomb.bin") || strings.HasSuffix(p, "__init__.py") && tc.name == "RECORD hash mismatch" {
					t.Errorf("left %s: an unverified file", p)
				}
			}
			// Verify reaches the same verdict as Extract.
			if w, err := openBytes(b, name); err == nil {
				if err := w.Verify(context.Background()); !errors.Is(err, tc.code) {
					t.Errorf("Verify: %v, want %s", err, tc.code)
				}
			}
		})
	}
}

func TestExtractChecksWhatCallerLeftUnread(t *testing.T) {
	ms := demoRaw()
	ms = append(ms, recordFor(ms, "demo_pkg-1.0.dist-info"))
	ms[1].data = bytes.ToUpper(ms[1].data) // cli.py: same size, other bytes
	b := rawZip(t, ms)
	w, err := openBytes(b, demoName)
	if err != nil {
		t.Fatal(err)
	}
	// A caller that reads nothing, or ignores read errors, still gets the fault.
	err = w.Extract(context.Background(), func(File, io.Reader) error { return nil })
	if !errors.Is(err, refusal.RecordMismatch) {
		t.Fatalf("got %v", err)
	}
	err = w.Extract(context.Background(), func(_ File, r io.Reader) error { io.ReadAll(r); return nil })
	if !errors.Is(err, refusal.RecordMismatch) {
		t.Fatalf("got %v", err)
	}
	// The reader itself ends in the refusal, not io.EOF.
	err = w.Extract(context.Background(), func(f File, r io.Reader) error {
		_, err := io.ReadAll(r)
		if f.Name == "demo_pkg/cli.py" && !errors.Is(err, refusal.RecordMismatch) {
			t.Errorf("reader ended with %v", err)
		}
		return err
	})
	if !errors.Is(err, refusal.RecordMismatch) {
		t.Fatalf("got %v", err)
	}
	if _, err := w.ReadFile("demo_pkg/cli.py"); !errors.Is(err, refusal.RecordMismatch) {
		t.Fatalf("ReadFile: %v", err)
	}
}

func TestExtractStopsOnCancel(t *testing.T) {
	w, err := openBytes(writeWheel(t, demoName, demoEntries()), demoName)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = w.Extract(ctx, func(File, io.Reader) error { n++; cancel(); return nil })
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("err %v after %d members", err, n)
	}
}

func TestRewrite(t *testing.T) {
	src := writeWheel(t, demoName, demoEntries())
	w, err := openBytes(src, demoName)
	if err != nil {
		t.Fatal(err)
	}
	di := w.DistInfo()
	repl := map[string][]byte{
		di + "/cruxible/provider.toml": []byte("schema = 1\n"),
		di + "/top_level.txt":          []byte("demo_pkg\nother\n"),
	}
	var out1, out2 bytes.Buffer
	if err := Rewrite(context.Background(), &out1, w, repl); err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(context.Background(), &out2, w, repl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out1.Bytes(), out2.Bytes()) {
		t.Fatal("Rewrite is not deterministic")
	}
	r, err := openBytes(out1.Bytes(), demoName)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range repl {
		if got, err := r.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s = %q, %v", name, got, err)
		}
	}
	// Other members keep bytes and modes.
	for _, f := range w.Files() {
		if _, replaced := repl[f.Name]; replaced || strings.HasSuffix(f.Name, "/RECORD") {
			continue
		}
		i, ok := r.byName[f.Name]
		if !ok || r.files[i].SHA256 != f.SHA256 || r.files[i].Mode != f.Mode {
			t.Errorf("%s changed: %+v vs %+v", f.Name, r.files[i], f)
		}
	}
	// Rewriting with the same content as Write would produce gives Write's bytes.
	var again bytes.Buffer
	if err := Rewrite(context.Background(), &again, w, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), src) {
		t.Error("Rewrite with no change differs from the source")
	}
	// RECORD cannot be replaced, nor files outside dist-info.
	for _, bad := range []string{di + "/RECORD", "demo_pkg/__init__.py"} {
		t.Run(bad, func(t *testing.T) {
			if err := Rewrite(context.Background(), io.Discard, w, map[string][]byte{bad: nil}); !errors.Is(err, refusal.WheelInvalid) {
				t.Errorf("replace %s: %v", bad, err)
			}
		})
	}
	// A tampered source is refused, not laundered into a fresh RECORD.
	ms := demoRaw()
	ms = append(ms, recordFor(ms, di))
	ms[0].data = []byte("VALUE = 43\n")
	tw, err := openBytes(rawZip(t, ms), demoName)
	if err != nil {
		t.Fatal(err)
	}
	if err := Rewrite(context.Background(), io.Discard, tw, repl); !errors.Is(err, refusal.RecordMismatch) {
		t.Errorf("tampered source: %v", err)
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, demoName)
	if err := os.WriteFile(p, writeWheel(t, demoName, demoEntries()), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "missing-1.0-py3-none-any.whl")); !errors.Is(err, refusal.WheelInvalid) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, refusal.WheelInvalid) {
		t.Errorf("directory: %v", err)
	}
}

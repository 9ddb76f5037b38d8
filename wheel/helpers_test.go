package wheel

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const demoName = "demo_pkg-1.0-py3-none-any.whl"

// demoEntries is a small pure-Python distribution with a console script,
// a gui script, and .data scheme directories.
func demoEntries() []Entry {
	di := "demo_pkg-1.0.dist-info/"
	return []Entry{
		{Name: "demo_pkg/__init__.py", Data: []byte("VALUE = 42\n")},
		{Name: "demo_pkg/cli.py", Data: []byte("def main():\n    print('demo says', 42)\n    return 0\n")},
		{Name: "demo_pkg-1.0.data/scripts/demo-raw", Data: []byte("#!python\nprint('raw script')\n"), Mode: 0o755},
		{Name: "demo_pkg-1.0.data/data/share/demo/readme.txt", Data: []byte("shared data\n")},
		{Name: "demo_pkg-1.0.data/headers/demo.h", Data: []byte("#define DEMO 1\n")},
		{Name: di + "WHEEL", Data: []byte("Wheel-Version: 1.0\nGenerator: cruxprov-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")},
		{Name: di + "METADATA", Data: []byte("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\nRequires-Python: >=3.8\nRequires-Dist: requests>=2\nRequires-Dist: idna; extra == \"x\"\n\nLong description.\n")},
		{Name: di + "entry_points.txt", Data: []byte("[console_scripts]\ndemo = demo_pkg.cli:main\n\n[gui_scripts]\ndemo-gui = demo_pkg.cli:main [gui]\n")},
		{Name: di + "top_level.txt", Data: []byte("demo_pkg\n")},
	}
}

// writeWheel writes a wheel with Write and returns its bytes.
func writeWheel(t testing.TB, name string, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, name, entries); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openBytes(b []byte, name string) (*Wheel, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), name)
}

// rawMember is one member of a hand-made zip, written without Write's
// checks, so tests can build any hostile archive.
type rawMember struct {
	name    string
	data    []byte
	mode    fs.FileMode // 0: 0644
	attrs   uint32      // when set, ExternalAttrs verbatim with an MS-DOS creator
	deflate bool
	// lieSize, when > 0, is the uncompressed size written into the
	// headers instead of len(data) (the CRC is of the first lieSize bytes).
	lieSize  int64
	noRecord bool // leave out of the generated RECORD
}

func rec(name string, data []byte) string {
	sum := sha256.Sum256(data)
	return name + ",sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]) + "," + strconv.Itoa(len(data)) + "\n"
}

// demoRaw returns the demo distribution as raw members.
func demoRaw() []rawMember {
	var ms []rawMember
	for _, e := range demoEntries() {
		ms = append(ms, rawMember{name: e.Name, data: e.Data, mode: e.Mode})
	}
	return ms
}

// recordFor generates RECORD for ms (members with noRecord left out) at
// dist-info di, plus extra lines.
func recordFor(ms []rawMember, di string, extra ...string) rawMember {
	var b strings.Builder
	for _, m := range ms {
		if m.noRecord || strings.HasSuffix(m.name, "/") {
			continue
		}
		b.WriteString(rec(m.name, m.data))
	}
	for _, x := range extra {
		b.WriteString(x)
	}
	b.WriteString(di + "/RECORD,,\n")
	return rawMember{name: di + "/RECORD", data: []byte(b.String())}
}

// rawZip writes members verbatim with archive/zip, bypassing Write.
func rawZip(t testing.TB, ms []rawMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		fh := &zip.FileHeader{Name: m.name, Method: zip.Store}
		mode := m.mode
		if mode == 0 {
			mode = 0o644
		}
		fh.SetMode(mode)
		if m.attrs != 0 {
			fh.CreatorVersion = 20 // MS-DOS creator: Unix bits not meant to count
			fh.ExternalAttrs = m.attrs
		}
		payload := m.data
		if m.deflate || m.lieSize > 0 {
			var c bytes.Buffer
			fw, _ := flate.NewWriter(&c, flate.BestCompression)
			fw.Write(m.data)
			fw.Close()
			payload = c.Bytes()
			fh.Method = zip.Deflate
		}
		size := int64(len(m.data))
		if m.lieSize > 0 {
			size = m.lieSize
		}
		fh.CRC32 = crc32.ChecksumIEEE(m.data[:size])
		fh.UncompressedSize64 = uint64(size)
		fh.CompressedSize64 = uint64(len(payload))
		w, err := zw.CreateRaw(fh)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(payload)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// extractTo installs w under dir the way an installer would: each member
// to a temporary file, renamed into place only once its reader reached a
// verified end. It reports the first error.
func extractTo(w *Wheel, dir string) error {
	return w.Extract(context.Background(), func(f File, r io.Reader) error {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(dst), ".part-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		if _, err := io.Copy(tmp, r); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), dst)
	})
}

// listTree returns every path under root, relative, slash-separated.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "." {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

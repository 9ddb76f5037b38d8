// Package wheeltest builds small wheels for tests: the one helper every
// package's tests use to make a wheel from a few files (issue 12 item 9),
// written with wheel.Write, so the same files give the same bytes.
//
// It owns nothing else and only tests import it. The wheel package's own
// tests cannot (wheeltest imports wheel); they call Write directly, and
// build hostile archives by hand.
package wheeltest

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cruxible/cruxprov/wheel"
)

// Build returns the bytes of the wheel named filename holding files
// (member name → content). "DI/" at the start of a name stands for the
// wheel's dist-info directory ("acme_echo-1.0.0.dist-info/"); a name
// ending in "*" is written executable (the "*" is dropped). WHEEL (pure
// Python, py3-none-any) and METADATA (the file name's distribution and
// version) are added unless files has them; RECORD is generated. A wheel
// that cannot be written fails the test.
func Build(t testing.TB, filename string, files map[string]string) []byte {
	t.Helper()
	fn, err := wheel.ParseFilename(filename)
	if err != nil {
		t.Fatal(err)
	}
	di := fn.Distribution + "-" + fn.Version + ".dist-info/"
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var es []wheel.Entry
	has := map[string]bool{}
	for _, n := range names {
		e := wheel.Entry{Name: n, Data: []byte(files[n])}
		if strings.HasSuffix(n, "*") {
			e.Name, e.Mode = strings.TrimSuffix(n, "*"), 0o755
		}
		if rest, ok := strings.CutPrefix(e.Name, "DI/"); ok {
			e.Name = di + rest
		}
		has[e.Name] = true
		es = append(es, e)
	}
	if !has[di+"WHEEL"] {
		es = append(es, wheel.Entry{Name: di + "WHEEL", Data: []byte("Wheel-Version: 1.0\nGenerator: cruxprov-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")})
	}
	if !has[di+"METADATA"] {
		es = append(es, wheel.Entry{Name: di + "METADATA", Data: []byte("Metadata-Version: 2.1\nName: " + fn.Distribution + "\nVersion: " + fn.Version + "\n")})
	}
	var buf bytes.Buffer
	if err := wheel.Write(&buf, filename, es); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Write writes Build's wheel to dir/filename and returns its path.
func Write(t testing.TB, dir, filename string, files map[string]string) string {
	t.Helper()
	p := filepath.Join(dir, filename)
	if err := os.WriteFile(p, Build(t, filename, files), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

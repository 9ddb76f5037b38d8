package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cruxible/cruxprov/refusal"
)

// scanEntry is one tar entry of a synthetic base layer.
type scanEntry struct {
	name, link string
	typeflag   byte
	data       []byte
}

// scanImage is an image of layers, each a gzipped tar of its entries.
func scanImage(t *testing.T, layers ...[]scanEntry) v1.Image {
	t.Helper()
	img := empty.Image
	for _, entries := range layers {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		tw := tar.NewWriter(zw)
		for _, e := range entries {
			h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typeflag, Mode: 0o755, Size: int64(len(e.data))}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		zw.Close()
		var err error
		if img, err = mutate.AppendLayers(img, static.NewLayer(buf.Bytes(), types.DockerLayer)); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// TestScanManyCandidates: a base with a thousand files named python3 (64
// KiB each) is refused interpreter_mismatch once more than maxCandidates
// have been read, holding one buffer, not every candidate's bytes.
// Before, the scan kept the bytes of every file so named (up to 64 MiB
// each, as many as the base had): here 64 MiB and no refusal.
func TestScanManyCandidates(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 64<<10)
	copy(body[1000:], "\x003.11.2\x00")
	var entries []scanEntry
	for i := range 1000 {
		entries = append(entries, scanEntry{name: fmt.Sprintf("opt/p%d/bin/python3", i), typeflag: tar.TypeReg, data: body})
	}
	img := scanImage(t, entries)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := scanFS(img, "")
	runtime.ReadMemStats(&after)
	if refusal.CodeOf(err) != refusal.InterpreterMismatch {
		t.Fatalf("a base with 1000 python3: %v, want interpreter_mismatch", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 24<<20 {
		t.Fatalf("the scan allocated %d bytes", got)
	}
}

// TestScanManyEntries: a base with more tar entries than maxScanEntries
// is refused interpreter_mismatch, not merged into an ever larger map.
func TestScanManyEntries(t *testing.T) {
	defer func(n int) { maxScanEntries = n }(maxScanEntries)
	maxScanEntries = 1000
	var entries []scanEntry
	for i := range 1001 {
		entries = append(entries, scanEntry{name: fmt.Sprintf("usr/share/f%d", i), typeflag: tar.TypeReg})
	}
	if _, err := scanFS(scanImage(t, entries), ""); refusal.CodeOf(err) != refusal.InterpreterMismatch {
		t.Fatalf("a base of 1001 entries: %v, want interpreter_mismatch", err)
	}
	if _, err := scanFS(scanImage(t, entries[:1000]), ""); err != nil {
		t.Fatalf("a base of 1000 entries: %v", err)
	}
}

// TestScanWhiteouts: a layer's whiteouts hide the lower layers' files,
// not its own (OCI image-spec), and are applied in one pass: a layer of
// 30000 whiteouts over 30000 files is read in well under a second.
// Before, each whiteout was a pass over every path (30000² prefix
// tests), and a whiteout after a file of its own layer hid that file.
func TestScanWhiteouts(t *testing.T) {
	version := []byte("ELF\x003.11.2\x00")
	lower := []scanEntry{
		{name: "usr/", typeflag: tar.TypeDir}, {name: "usr/bin/", typeflag: tar.TypeDir}, {name: "srv/", typeflag: tar.TypeDir},
		{name: "usr/bin/python3", typeflag: tar.TypeSymlink, link: "python3.11"},
		{name: "usr/bin/python3.11", typeflag: tar.TypeReg, data: []byte("ELF\x003.11.1\x00")},
	}
	upper := []scanEntry{
		{name: "usr/bin/python3.11", typeflag: tar.TypeReg, data: version},
		{name: "usr/bin/.wh.python3.11", typeflag: tar.TypeReg},
	}
	for i := range 30000 {
		lower = append(lower, scanEntry{name: fmt.Sprintf("srv/d%d/f", i), typeflag: tar.TypeReg})
		upper = append(upper, scanEntry{name: fmt.Sprintf("srv/.wh.d%d", i), typeflag: tar.TypeReg})
	}
	img := scanImage(t, lower, upper)
	start := time.Now()
	fs, err := scanFS(img, "")
	took := time.Since(start)
	t.Logf("scanned in %v", took)
	if err != nil {
		t.Fatal(err)
	}
	in, err := findInterpreter(fs, "")
	if err != nil || in.Path != "/usr/bin/python3.11" || in.Version != "3.11.2" {
		t.Fatalf("interpreter %+v, %v: want the upper layer's /usr/bin/python3.11, 3.11.2", in, err)
	}
	for p := range fs {
		if len(p) > 5 && p[:5] == "/srv/" {
			t.Fatalf("%s survived its whiteout", p)
		}
	}
	if took > 10*time.Second { // 41 s before, 2 s now, under -race
		t.Fatalf("the scan took %v", took)
	}
}

// TestNoInterpreterAdvisesNaming: a base with no interpreter found is
// refused with the remedy that names one (its path in the image), as
// the words say: they said the flag before issue 12 item 5, and then
// nothing the CLI could render.
func TestNoInterpreterAdvisesNaming(t *testing.T) {
	_, err := findInterpreter(map[string]*node{}, "")
	if refusal.CodeOf(err) != refusal.InterpreterMismatch || !strings.Contains(err.Error(), "no Python interpreter found") {
		t.Fatalf("an empty base: %v", err)
	}
	if r := refusal.RemedyOf(err); r == nil || r.Action != refusal.ActionNamePython {
		t.Fatalf("an empty base: remedy %+v, want %s", r, refusal.ActionNamePython)
	}
}

package index

import (
	"fmt"
	"strings"
	"testing"
)

// A page the size of a busy PyPI project's: 2000 files.
func benchPages() (html, json string) {
	var h, j strings.Builder
	h.WriteString(`<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.1"></head><body>`)
	j.WriteString(`{"meta":{"api-version":"1.1"},"name":"foo","files":[`)
	for i := 0; i < 2000; i++ {
		fn := fmt.Sprintf("foo-1.%d-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", i)
		fmt.Fprintf(&h, `<a href="https://files.example/packages/ab/cd/%s#sha256=%s" data-requires-python="&gt;=3.8" data-dist-info-metadata="sha256=%s" data-core-metadata="sha256=%s">%s</a><br/>`+"\n", fn, hexA, hexA, hexA, fn)
		if i > 0 {
			j.WriteString(",")
		}
		fmt.Fprintf(&j, `{"filename":%q,"url":"https://files.example/packages/ab/cd/%s","hashes":{"sha256":%q},"requires-python":">=3.8","core-metadata":{"sha256":%q},"size":123456,"yanked":false}`, fn, fn, hexA, hexA)
	}
	h.WriteString("</body></html>")
	j.WriteString("]}")
	return h.String(), j.String()
}

func BenchmarkParseHTML2000(b *testing.B) {
	page, _ := benchPages()
	base := mustURL(b, "https://idx.example/simple/foo/")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if f, err := parseHTML(base, []byte(page)); err != nil || len(f) != 2000 {
			b.Fatal(err, len(f))
		}
	}
}

func BenchmarkParseJSON2000(b *testing.B) {
	_, page := benchPages()
	base := mustURL(b, "https://idx.example/simple/foo/")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if f, err := parseJSON(base, []byte(page)); err != nil || len(f) != 2000 {
			b.Fatal(err, len(f))
		}
	}
}

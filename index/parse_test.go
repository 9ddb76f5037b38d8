package index

import (
	"net/url"
	"reflect"
	"testing"

	"github.com/cruxible/cruxprov/pep503"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

const hexA = "aa97b256ec689d4d7efe55a476b3ec9e7dae960d4a60d72f847b5af5b6c140d8"

func TestParseHTML(t *testing.T) {
	page := "https://idx.example/simple/foo/"
	tests := []struct {
		name    string
		body    string
		want    []File
		wantErr bool
	}{
		{"fragment and relative href", `<a href="../../files/foo-1.0-py3-none-any.whl#sha256=` + hexA + `">foo-1.0-py3-none-any.whl</a>`,
			[]File{{Filename: "foo-1.0-py3-none-any.whl", URL: "https://idx.example/files/foo-1.0-py3-none-any.whl", Hashes: map[string]string{"sha256": hexA}}}, false},
		{"entities, yanked, metadata", `<A HREF="https://cdn.example/f/foo-1.0%2Blocal-py3-none-any.whl#SHA256=` + hexA + `" data-requires-python="&gt;=3.8,&lt;4" data-yanked="broken build" data-core-metadata="sha256=` + hexA + `">x</A>`,
			[]File{{Filename: "foo-1.0+local-py3-none-any.whl", URL: "https://cdn.example/f/foo-1.0%2Blocal-py3-none-any.whl", Hashes: map[string]string{"sha256": hexA},
				RequiresPython: ">=3.8,<4", Yanked: true, YankedReason: "broken build", CoreMetadata: true, MetadataHashes: map[string]string{"sha256": hexA}}}, false},
		{"empty data-yanked, dist-info-metadata true", `<a href="foo-2.0.tar.gz" data-yanked data-dist-info-metadata="true">foo</a>`,
			[]File{{Filename: "foo-2.0.tar.gz", URL: "https://idx.example/simple/foo/foo-2.0.tar.gz", Yanked: true, CoreMetadata: true}}, false},
		{"base href", `<html><head><base href="https://mirror.example/pkgs/"></head><a href="foo-1.whl">foo</a></html>`,
			[]File{{Filename: "foo-1.whl", URL: "https://mirror.example/pkgs/foo-1.whl"}}, false},
		{"non-files skipped", `<a href="javascript:x()">j</a><a href="../">up</a><a name="x">n</a>`, nil, false},
		{"repository version 1.x accepted", `<meta name="pypi:repository-version" content="1.3"><a href="a.whl">a</a>`,
			[]File{{Filename: "a.whl", URL: "https://idx.example/simple/foo/a.whl"}}, false},
		{"repository version 2 refused", `<meta name="pypi:repository-version" content="2.0"><a href="a.whl">a</a>`, nil, true},
		{"malformed tail", `<a href="a.whl">a</a><a href="b.whl`, []File{{Filename: "a.whl", URL: "https://idx.example/simple/foo/a.whl"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHTML(mustURL(t, page), []byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseJSON(t *testing.T) {
	page := "https://idx.example/simple/foo/"
	tests := []struct {
		name    string
		body    string
		want    []File
		wantErr bool
	}{
		{"full", `{"meta":{"api-version":"1.1"},"name":"foo","files":[{"filename":"foo-1.0-py3-none-any.whl","url":"../../files/foo-1.0-py3-none-any.whl","hashes":{"SHA256":"` + hexA + `"},"requires-python":">=3.8","yanked":"bad","core-metadata":{"sha256":"` + hexA + `"},"size":12}]}`,
			[]File{{Filename: "foo-1.0-py3-none-any.whl", URL: "https://idx.example/files/foo-1.0-py3-none-any.whl", Hashes: map[string]string{"sha256": hexA}, RequiresPython: ">=3.8",
				Yanked: true, YankedReason: "bad", CoreMetadata: true, MetadataHashes: map[string]string{"sha256": hexA}, Size: 12}}, false},
		{"yanked false, dist-info-metadata true", `{"meta":{"api-version":"1.0"},"name":"foo","files":[{"filename":"a.whl","url":"https://cdn.example/a.whl#sha256=00","hashes":{},"yanked":false,"dist-info-metadata":true}]}`,
			[]File{{Filename: "a.whl", URL: "https://cdn.example/a.whl", CoreMetadata: true}}, false},
		{"api version 2", `{"meta":{"api-version":"2.0"},"name":"foo","files":[]}`, nil, true},
		{"no meta", `{"name":"foo","files":[]}`, nil, true},
		{"path in filename", `{"meta":{"api-version":"1.0"},"files":[{"filename":"../a.whl","url":"a.whl","hashes":{}}]}`, nil, true},
		{"empty url", `{"meta":{"api-version":"1.0"},"files":[{"filename":"a.whl","url":"","hashes":{}}]}`, nil, true},
		{"negative size", `{"meta":{"api-version":"1.0"},"files":[{"filename":"a.whl","url":"a.whl","size":-1}]}`, nil, true},
		{"bad yanked", `{"meta":{"api-version":"1.0"},"files":[{"filename":"a.whl","url":"a.whl","yanked":1}]}`, nil, true},
		{"not json", `<html>`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJSON(mustURL(t, page), []byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{"Foo_Bar": "foo-bar", "foo.-_bar": "foo-bar", "ZOPE.interface": "zope-interface", "a": "a"} {
		t.Run(in, func(t *testing.T) {
			if got := pep503.Normalize(in); got != want {
				t.Errorf("pep503.Normalize(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func TestParseNetrc(t *testing.T) {
	data := "# comment\nmachine idx.example login alice password s3cret\n" +
		"default login anon password x\n" +
		"machine other.example:8443\n  login bob\n  account a\n  password pw2 # trailing\n" +
		"macdef init\nmachine evil.example login m password m\n\nmachine last.example password only\n"
	got := ParseNetrc([]byte(data))
	want := []Credential{{Host: "idx.example", Username: "alice", Password: "s3cret"}, {Host: "other.example:8443", Username: "bob", Password: "pw2"}, {Host: "last.example", Password: "only"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@idx.example/simple/":   "https://u:xxxxx@idx.example/simple/",
		"https://token@idx.example/simple/": "https://xxxxx@idx.example/simple/",
		"https://idx.example/f.whl?sig=abc": "https://idx.example/f.whl?REDACTED",
		"https://idx.example/simple/foo/":   "https://idx.example/simple/foo/",
		"http://[::1:bad/":                  "<unparseable URL>",
		"https://u:123/p@idx.example/":      "<malformed URL>",
		"https://tok:@idx.example/simple/":  "https://xxxxx@idx.example/simple/",
	} {
		t.Run(in, func(t *testing.T) {
			if got := Redact(in); got != want {
				t.Errorf("Redact(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func FuzzParseHTML(f *testing.F) {
	f.Add([]byte(`<a href="../../files/foo-1.0-py3-none-any.whl#sha256=` + hexA + `" data-requires-python="&gt;=3.8" data-yanked="" data-core-metadata="sha256=00">x</a>`))
	f.Add([]byte(`<base href="//x/"><meta name="pypi:repository-version" content="1.0"><a href="%zz">`))
	f.Add([]byte(`<a href="http://[::1">`))
	f.Add([]byte{})
	base := mustURL(f, "https://idx.example/simple/foo/")
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := parseHTML(base, b)
		if err != nil {
			return
		}
		for _, fl := range files {
			if fl.Filename == "" || fl.URL == "" {
				t.Fatalf("file without name or URL: %+v", fl)
			}
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"meta":{"api-version":"1.1"},"name":"foo","files":[{"filename":"a.whl","url":"a.whl","hashes":{"sha256":"00"},"yanked":"r","core-metadata":{"sha256":"00"},"size":3}]}`))
	f.Add([]byte(`{"meta":{"api-version":"1.0"},"files":[{"filename":"a","url":"http://[::1"}]}`))
	f.Add([]byte(`null`))
	base := mustURL(f, "https://idx.example/simple/foo/")
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := parseJSON(base, b)
		if err != nil {
			return
		}
		for _, fl := range files {
			if fl.Filename == "" || fl.URL == "" || fl.Size < 0 {
				t.Fatalf("bad file: %+v", fl)
			}
		}
	})
}
